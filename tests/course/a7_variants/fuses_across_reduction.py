"""Planted bug (part 1): every op counts as fusible, so chains swallow reductions (and the matmul)."""
# %% [a7-chains] patch
# <<<
        if not fusible(node):
            continue
# ===
        if node.kind != "call_op":
            continue
# >>>
