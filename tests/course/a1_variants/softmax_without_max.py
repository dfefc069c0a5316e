"""Planted bug (part 2): Softmax and LogSoftmax exponentiate the raw logits (no max subtracted):
right for small logits, inf/NaN for logits around 1000."""
# %% [a1-softmax]
class Softmax(Function):
    @staticmethod
    def forward(ctx, x, dim=-1):
        with np.errstate(over="ignore", invalid="ignore"):
            e = np.exp(x)
            s = e / e.sum(axis=dim, keepdims=True)
        ctx.save_for_backward(s)
        ctx.dim = dim
        return s

    @staticmethod
    def backward(ctx, grad):
        s, = ctx.saved_tensors
        return s * (grad - (grad * s).sum(axis=ctx.dim, keepdims=True))


class LogSoftmax(Function):
    @staticmethod
    def forward(ctx, x, dim=-1):
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            out = x - np.log(np.exp(x).sum(axis=dim, keepdims=True))
        ctx.save_for_backward(out)
        ctx.dim = dim
        return out

    @staticmethod
    def backward(ctx, grad):
        out, = ctx.saved_tensors
        return grad - np.exp(out) * grad.sum(axis=ctx.dim, keepdims=True)
