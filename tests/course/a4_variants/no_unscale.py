"""Planted bug (part 5): the training loop checks for inf/NaN but never unscales, so every step is
65536 times too large."""
# %% [a4-train] patch
# <<<
        found = unscale_(grads, scaler.scale)
# ===
        found = not all(np.isfinite(g).all() for g in grads)   # BUG: no unscale
# >>>
