"""Planted bug (part 2): the kernel runs on the whole array at once: right values, full-size buffers."""
# %% [a7-fuse] patch
# <<<
    step = max(1, block // rows.shape[1])
# ===
    step = rows.shape[0]
# >>>
