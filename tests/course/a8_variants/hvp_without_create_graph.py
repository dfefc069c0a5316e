# The first gradient is taken without create_graph=True: it can't be differentiated again.
# %% [a8-hvp] patch
# <<<
    g, = mg.autograd.grad(f(x), x, create_graph=True)
# ===
    g, = mg.autograd.grad(f(x), x)
# >>>
