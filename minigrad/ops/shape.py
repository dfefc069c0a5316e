"""Shape ops. Most are views: they share storage (and the version counter) with their input."""
from ..autograd.function import Function


class Reshape(Function):
    @staticmethod
    def forward(ctx, a, shape):
        ctx.in_shape = a.shape
        return a.reshape(shape)

    @staticmethod
    def backward(ctx, grad):
        return grad.reshape(ctx.in_shape), None


class Transpose(Function):
    @staticmethod
    def forward(ctx, a, d0, d1):
        ctx.dims = (d0, d1)
        return a.swapaxes(d0, d1)

    @staticmethod
    def backward(ctx, grad):
        return grad.swapaxes(*ctx.dims), None, None


class Permute(Function):
    @staticmethod
    def forward(ctx, a, dims):
        ctx.dims = dims
        return a.transpose(dims)

    @staticmethod
    def backward(ctx, grad):
        inverse = [0] * len(ctx.dims)
        for i, d in enumerate(ctx.dims):
            inverse[d] = i
        return grad.transpose(inverse), None


class Expand(Function):
    """A broadcast view; the engine's un-broadcasting sums the gradient back."""

    @staticmethod
    def forward(ctx, a, shape):
        return ctx.xp.broadcast_to(a, shape)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class Cat(Function):
    @staticmethod
    def forward(ctx, *arrays, dim):
        ctx.sizes = [a.shape[dim] for a in arrays]
        ctx.dim = dim
        return ctx.xp.concatenate(arrays, axis=dim)

    @staticmethod
    def backward(ctx, grad):
        xp = ctx.xp
        cuts = []
        total = 0
        for s in ctx.sizes[:-1]:
            total += s
            cuts.append(total)
        return tuple(xp.split(grad, cuts, axis=ctx.dim))


class Stack(Function):
    @staticmethod
    def forward(ctx, *arrays, dim):
        ctx.dim = dim
        ctx.n = len(arrays)
        return ctx.xp.stack(arrays, axis=dim)

    @staticmethod
    def backward(ctx, grad):
        xp = ctx.xp
        return tuple(xp.take(grad, i, axis=ctx.dim) for i in range(ctx.n))


class Pad(Function):
    """Constant padding; ``widths`` is NumPy's ((before, after), ...) per dim."""

    @staticmethod
    def forward(ctx, a, widths, value):
        ctx.slices = tuple(slice(b, b + n) for (b, _), n in zip(widths, a.shape))
        return ctx.xp.pad(a, widths, mode="constant", constant_values=value)

    @staticmethod
    def backward(ctx, grad):
        return grad[ctx.slices], None, None


class Repeat(Function):
    """Tile ``a`` ``reps`` times per dim (PyTorch's ``repeat``)."""

    @staticmethod
    def forward(ctx, a, reps):
        ctx.in_shape = (1,) * (len(reps) - a.ndim) + a.shape
        ctx.a_shape = a.shape
        ctx.reps = reps
        return ctx.xp.tile(a, reps)

    @staticmethod
    def backward(ctx, grad):
        split = []
        for r, s in zip(ctx.reps, ctx.in_shape):
            split += [r, s]
        g = grad.reshape(split).sum(axis=tuple(range(0, len(split), 2)))
        return g.reshape(ctx.a_shape), None


class Tril(Function):
    @staticmethod
    def forward(ctx, a, k, upper):
        ctx.k, ctx.upper = k, upper
        return ctx.xp.triu(a, k) if upper else ctx.xp.tril(a, k)

    @staticmethod
    def backward(ctx, grad):
        xp = ctx.xp
        return (xp.triu(grad, ctx.k) if ctx.upper else xp.tril(grad, ctx.k)), None, None


class MaskedFill(Function):
    @staticmethod
    def forward(ctx, a, mask, value):
        ctx.save_for_backward(mask)
        return ctx.xp.where(mask, ctx.xp.asarray(value, dtype=a.dtype), a)

    @staticmethod
    def backward(ctx, grad):
        mask, = ctx.saved_tensors
        return ctx.xp.where(mask, grad.dtype.type(0), grad), None, None


class Flip(Function):
    @staticmethod
    def forward(ctx, a, dims):
        ctx.dims = dims
        return ctx.xp.flip(a, dims)

    @staticmethod
    def backward(ctx, grad):
        return ctx.xp.flip(grad, ctx.dims), None
