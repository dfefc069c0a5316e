"""Planted bug (part 3): the softmax backward forgets the row term D = rowsum(dO * O)."""
# %% [a7-flash] patch
# <<<
                ds = p * (grad[:, i0:i1] @ v[:, j0:j1].transpose(0, 2, 1) - D[:, i0:i1])
# ===
                ds = p * (grad[:, i0:i1] @ v[:, j0:j1].transpose(0, 2, 1))
# >>>
