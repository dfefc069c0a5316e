# part2 (cause 4): every vjp is cut from the graph (its factor computed on NumPy arrays). First derivatives are
# right; second derivatives are 0, which is right only for LogSumExp over a dim of size 1 (the identity): that
# case is credited only beside a case with a curvature, so the test earns nothing.
# %% [a8-twice] patch
# <<<
        y, = ctx.saved_tensors          # the output, as a Tensor of the graph
        return grad * (1 - y * y)
# ===
        y, = ctx.saved_tensors
        return grad * mg.tensor(1 - y.detach().numpy() ** 2)
# >>>
# <<<
        x, = ctx.saved_tensors
        return grad / (1 + (-x).exp())
# ===
        x, = ctx.saved_tensors
        return grad * mg.tensor(1 / (1 + np.exp(-x.detach().numpy())))
# >>>
# <<<
        return grad.unsqueeze(ctx.dim) * (x - out.unsqueeze(ctx.dim)).exp()
# ===
        return grad.unsqueeze(ctx.dim) * mg.tensor(np.exp(x.detach().numpy() -
                                                          np.expand_dims(out.detach().numpy(), ctx.dim)))
# >>>
