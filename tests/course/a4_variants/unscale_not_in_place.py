"""Planted bug (part 2): unscale_ rebinds a new array instead of writing into the gradient."""
# %% [a4-unscale] patch
# <<<
        g *= inv
# ===
        g = g * inv                               # BUG: the caller's array is untouched
# >>>
