# hvp stops after the first gradient.
# %% [a8-hvp] patch
# <<<
    hv, = mg.autograd.grad((g * v).sum(), x)
    return hv
# ===
    return g
# >>>
