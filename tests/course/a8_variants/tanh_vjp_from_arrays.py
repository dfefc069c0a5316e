# Tanh.vjp computes its factor on NumPy arrays: right first derivatives, but the gradient is cut from x's
# graph, so its own derivative with respect to x is 0.
# %% [a8-twice] patch
# <<<
        y, = ctx.saved_tensors          # the output, as a Tensor of the graph
        return grad * (1 - y * y)
# ===
        y, = ctx.saved_tensors
        return grad * mg.tensor(1 - y.detach().numpy() ** 2)
# >>>
