"""Planted bug (part 2): Sum.backward broadcasts the gradient without putting back the summed axes
(keepdim=False): right by luck for a full sum or keepdim=True, wrong for Sum(dim=1) of a square matrix."""
# %% [a1-sum]
class Sum(Function):
    @staticmethod
    def forward(ctx, x, dim=None, keepdim=False):
        ctx.shape = x.shape
        return np.sum(x, axis=dim, keepdims=keepdim)

    @staticmethod
    def backward(ctx, grad):
        return np.broadcast_to(grad, ctx.shape).copy()
