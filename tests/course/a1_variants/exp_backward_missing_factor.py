"""Planted bug (part 1): Exp.backward forgets the local derivative e^x and returns the upstream grad."""
# %% [a1-exp]
class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        out = np.exp(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        return grad
