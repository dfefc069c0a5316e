"""Planted bug (part 1): Exp.backward forgets the local derivative e^x and returns the upstream grad."""
# %% [a1-exp] patch
# <<<
    def backward(ctx, grad):
        out, = ctx.saved_tensors
        return grad * out
# ===
    def backward(ctx, grad):
        return grad
# >>>
