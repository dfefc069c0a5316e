"""embedding: rows of ``weight`` picked by integer indices; backward scatter-adds (repeats accumulate)."""
from ...autograd.function import Function
from ...errors import DTypeError, OpIndexError, ShapeError
from ..indexing import scatter_add


class Embedding(Function):
    name = "embedding"

    @staticmethod
    def forward(ctx, indices, weight, padding_idx):
        xp = ctx.xp
        if indices.dtype.kind not in "iu":
            raise DTypeError(f"embedding: indices must be an integer tensor (int64 or int32), got "
                             f"{indices.dtype} of shape {tuple(indices.shape)}")
        if weight.ndim != 2:
            raise ShapeError(f"embedding: weight must be 2-D (num_embeddings, embedding_dim), got shape "
                             f"{tuple(weight.shape)}")
        V = weight.shape[0]
        if indices.size:
            lo, hi = int(indices.min()), int(indices.max())
            if lo < 0 or hi >= V:
                bad = lo if lo < 0 else hi
                raise OpIndexError(f"embedding: index {bad} is out of range for {V} embeddings "
                                   f"(weight shape {tuple(weight.shape)}; valid indices 0..{V - 1})")
        ctx.save_for_backward(indices)
        ctx.weight_shape, ctx.padding_idx = weight.shape, padding_idx
        return xp.take(weight, indices, axis=0)

    @staticmethod
    def backward(ctx, grad):
        xp = ctx.xp
        indices, = ctx.saved_tensors
        dw = xp.zeros(ctx.weight_shape, dtype=grad.dtype)
        scatter_add(xp, dw, indices.reshape(-1), grad.reshape(-1, ctx.weight_shape[1]))
        if ctx.padding_idx is not None:
            dw[ctx.padding_idx] = 0
        return None, dw, None
