"""embedding: rows of ``weight`` picked by integer indices; backward scatter-adds (repeats accumulate)."""
from ...autograd.function import Function
from ...errors import ArgumentError, DTypeError, OpIndexError, ShapeError
from ..indexing import IndexScatter, SetItem, scatter_add


class Embedding(Function):
    name = "embedding"

    @staticmethod
    def forward(ctx, indices, weight, *, padding_idx):
        ctx.save_for_backward(indices)
        ctx.weight_shape, ctx.padding_idx = weight.shape, padding_idx
        return ctx.xp.take(weight, indices, axis=0)

    @staticmethod
    def backward(ctx, grad):
        xp = ctx.xp
        indices, = ctx.saved_tensors
        dw = xp.zeros(ctx.weight_shape, dtype=grad.dtype)
        scatter_add(xp, dw, indices.reshape(-1), grad.reshape(-1, ctx.weight_shape[1]))
        if ctx.padding_idx is not None:
            dw[ctx.padding_idx] = 0
        return None, dw

    @staticmethod
    def vjp(ctx, grad):
        indices, = ctx.saved_tensors
        dw = IndexScatter.apply(grad.reshape(-1, ctx.weight_shape[1]), in_shape=ctx.weight_shape,
                                index=indices.array.reshape(-1))
        return None, dw if ctx.padding_idx is None else SetItem.apply(dw, 0.0, index=ctx.padding_idx)

    @staticmethod
    def jvp(primals, tangents, out, padding_idx):
        return Embedding.apply(primals[0], tangents[1], padding_idx=padding_idx)


def _check_embedding(indices, weight, padding_idx):
    """Returns the padding_idx made non-negative (None stays None)."""
    if padding_idx is not None:
        V = weight.shape[0]
        if isinstance(padding_idx, bool) or not isinstance(padding_idx, int) or not -V <= padding_idx < V:
            raise ArgumentError(f"embedding: padding_idx must be an int within num_embeddings ({V}), "
                                f"got {padding_idx!r}")
        padding_idx %= V
    if indices.array.dtype.kind not in "iu":
        raise DTypeError(f"embedding: indices must be an integer tensor (int64 or int32), got "
                         f"{indices.array.dtype} of shape {tuple(indices.shape)}")
    if weight.ndim != 2:
        raise ShapeError(f"embedding: weight must be 2-D (num_embeddings, embedding_dim), got shape "
                         f"{tuple(weight.shape)}")
    V = weight.shape[0]
    if indices.numel():
        lo, hi = int(indices.array.min()), int(indices.array.max())
        if lo < 0 or hi >= V:
            raise OpIndexError(f"embedding: index {lo if lo < 0 else hi} is out of range for {V} embeddings "
                               f"(weight shape {tuple(weight.shape)}; valid indices 0..{V - 1})")
    return padding_idx


def embedding(input, weight, padding_idx=None):
    """Rows of ``weight`` (num_embeddings, dim) at integer ``input``; the padding_idx row gets no gradient."""
    padding_idx = _check_embedding(input, weight, padding_idx)
    return Embedding.apply(input, weight, padding_idx=padding_idx)
