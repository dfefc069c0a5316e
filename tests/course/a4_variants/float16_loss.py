"""Planted bug (part 4): cross_entropy on float16 logits, so the loss is float16."""
# %% [a4-forward] patch
# <<<
    return F.cross_entropy(logits.float(), y)
# ===
    return F.cross_entropy(logits, y)             # BUG: the loss stays float16
# >>>
