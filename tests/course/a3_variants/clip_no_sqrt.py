# The "norm" is the sum of squares.
# %% [a3-clip] patch
# <<<
    total = math.sqrt(sum(float(np.vdot(g, g)) for g in grads))
# ===
    total = sum(float(np.vdot(g, g)) for g in grads)
# >>>
