"""Planted bug (part 2): unscale_ multiplies by the scale instead of dividing."""
# %% [a4-unscale] patch
# <<<
    inv = np.float32(1.0 / scale)
# ===
    inv = np.float32(scale)                       # BUG: multiplies
# >>>
