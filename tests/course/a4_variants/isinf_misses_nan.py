"""Planted bug (part 2): the overflow check uses isinf, so a NaN gradient goes unnoticed."""
# %% [a4-unscale] patch
# <<<
        if not np.isfinite(g).all():
# ===
        if np.isinf(g).any():                     # BUG: NaN passes
# >>>
