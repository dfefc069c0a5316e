"""Shape ops that copy: constant padding, tiling (``repeat``), triangles (``tril``/``triu``), ``flip`` and
``roll``. Each is linear in its input: its gradient is the matching copy back, its JVP the op on the tangent.
"""
from ..autograd.function import Function
from ..errors import ArgumentError, ShapeError
from ._args import norm_dim, norm_dims, shape_arg
from ._rules import linear


class Pad(Function):
    """Constant padding; ``widths`` is NumPy's ((before, after), ...) per dim."""

    @staticmethod
    def forward(ctx, a, *, widths, value):
        ctx.slices = tuple(slice(b, b + n) for (b, _), n in zip(widths, a.shape))
        return ctx.xp.pad(a, widths, mode="constant", constant_values=value)

    @staticmethod
    def backward(ctx, grad):
        return grad[ctx.slices]

    vjp = backward

    @staticmethod
    def jvp(primals, tangents, out, widths, value):
        return Pad.apply(tangents[0], widths=widths, value=0.0)   # the padding is constant


def pad(a, pad, mode="constant", value=0.0):
    """PyTorch order: ``pad=(left, right, top, bottom, ...)`` starting from the last dim."""
    if mode != "constant":
        raise ArgumentError(f"pad: only mode='constant' is supported, got {mode!r}")
    if len(pad) % 2 or len(pad) // 2 > a.ndim:
        raise ArgumentError(f"pad: padding {tuple(pad)} must have an even length of at most 2*{a.ndim}")
    widths = [(0, 0)] * a.ndim
    for i in range(len(pad) // 2):
        lo, hi = int(pad[2 * i]), int(pad[2 * i + 1])
        if lo < 0 or hi < 0:
            raise ArgumentError("pad: negative padding is not supported")
        widths[a.ndim - 1 - i] = (lo, hi)
    return Pad.apply(a, widths=tuple(widths), value=value)


class Repeat(Function):
    """Tile ``a`` ``reps`` times per dim (PyTorch's ``repeat``)."""

    @staticmethod
    def forward(ctx, a, *, reps):
        ctx.padded_shape = (1,) * (len(reps) - a.ndim) + a.shape
        ctx.in_shape = a.shape
        ctx.reps = reps
        return ctx.xp.tile(a, reps)

    @staticmethod
    def backward(ctx, grad):
        split = []
        for r, s in zip(ctx.reps, ctx.padded_shape):
            split += [r, s]
        g = grad.reshape(split).sum(axis=tuple(range(0, len(split), 2)))
        return g.reshape(ctx.in_shape)

    vjp = backward
    jvp = linear


def repeat(a, *sizes):
    sizes = shape_arg(sizes)
    if len(sizes) < a.ndim:
        raise ShapeError(f"repeat: number of repeat dims ({len(sizes)}) can not be smaller than the "
                         f"number of tensor dims ({a.ndim})")
    return Repeat.apply(a, reps=sizes)


class Roll(Function):
    """Shift elements along dims, wrapping around; the gradient rolls back by the opposite shifts."""

    @staticmethod
    def forward(ctx, a, *, shifts, dims):
        ctx.shifts, ctx.dims = shifts, dims
        if dims is None:                       # roll the flattened tensor, keep the shape
            return ctx.xp.roll(a.reshape(-1), shifts).reshape(a.shape)
        return ctx.xp.roll(a, shifts, axis=dims)

    @staticmethod
    def backward(ctx, grad):
        back = tuple(-s for s in ctx.shifts) if isinstance(ctx.shifts, tuple) else -ctx.shifts
        if ctx.dims is None:
            return ctx.xp.roll(grad.reshape(-1), back).reshape(grad.shape)
        return ctx.xp.roll(grad, back, axis=ctx.dims)

    @staticmethod
    def vjp(ctx, grad):
        back = tuple(-s for s in ctx.shifts) if isinstance(ctx.shifts, tuple) else -ctx.shifts
        return Roll.apply(grad, shifts=back, dims=ctx.dims)

    jvp = linear


def roll(a, shifts, dims=None):
    """``roll(a, 1, 0)``; several dims at once with tuples of equal length; ``dims=None`` rolls the
    flattened tensor."""
    many = isinstance(shifts, (tuple, list))
    if dims is None:
        if many and len(shifts) != 1:
            raise ArgumentError(f"roll: without dims, shifts must be one int, got {tuple(shifts)}")
        return Roll.apply(a, shifts=int(shifts[0] if many else shifts), dims=None)
    dims_t = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
    shifts_t = tuple(int(s) for s in shifts) if many else (int(shifts),)
    if len(shifts_t) != len(dims_t):
        raise ArgumentError(f"roll: shifts and dims must have the same length, got shifts={shifts_t} and "
                            f"dims={dims_t}")
    return Roll.apply(a, shifts=shifts_t, dims=tuple(norm_dim(d, a.ndim, "roll") for d in dims_t))


class Tril(Function):
    """The lower (``upper=False``) or upper triangle from ``diagonal`` on; the rest is zero."""

    @staticmethod
    def forward(ctx, a, *, diagonal, upper):
        ctx.diagonal, ctx.upper = diagonal, upper
        return ctx.xp.triu(a, diagonal) if upper else ctx.xp.tril(a, diagonal)

    @staticmethod
    def backward(ctx, grad):
        xp = ctx.xp
        return xp.triu(grad, ctx.diagonal) if ctx.upper else xp.tril(grad, ctx.diagonal)

    @staticmethod
    def vjp(ctx, grad):
        return Tril.apply(grad, diagonal=ctx.diagonal, upper=ctx.upper)

    jvp = linear


def _triangle(a, diagonal, upper):
    if a.ndim < 2:
        op = "triu" if upper else "tril"
        raise ShapeError(f"{op}: input must have at least 2 dims, got shape {tuple(a.shape)}")
    return Tril.apply(a, diagonal=diagonal, upper=upper)


def tril(a, diagonal=0):
    return _triangle(a, diagonal, False)


def triu(a, diagonal=0):
    return _triangle(a, diagonal, True)


class Flip(Function):
    @staticmethod
    def forward(ctx, a, *, dims):
        ctx.dims = dims
        return ctx.xp.flip(a, dims)

    @staticmethod
    def backward(ctx, grad):
        return ctx.xp.flip(grad, ctx.dims)

    @staticmethod
    def vjp(ctx, grad):
        return Flip.apply(grad, dims=ctx.dims)

    jvp = linear


def flip(a, dims):
    dims = norm_dims(tuple(dims) if isinstance(dims, (list, tuple)) else (dims,), a.ndim, "flip")
    return Flip.apply(a, dims=dims)
