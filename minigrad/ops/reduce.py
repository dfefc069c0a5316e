"""Reductions over ``dim`` (an int, a tuple, or None for all), with ``keepdim`` as in PyTorch."""
from ..autograd.function import Function
from .indexing import open_grid


def _expand_back(xp, grad, in_shape, axis, keepdim):
    """Reshape a reduced gradient so it broadcasts against the input again."""
    if axis is not None and not keepdim:
        axes = (axis,) if isinstance(axis, int) else axis
        shape = list(grad.shape)
        for ax in sorted(a % len(in_shape) for a in axes):
            shape.insert(ax, 1)
        grad = grad.reshape(shape)
    elif axis is None and not keepdim:
        grad = grad.reshape((1,) * len(in_shape))
    return grad


def _count(shape, axis):
    if axis is None:
        n = 1
        for s in shape:
            n *= s
        return n
    axes = (axis,) if isinstance(axis, int) else axis
    n = 1
    for a in axes:
        n *= shape[a]
    return n


class Sum(Function):
    @staticmethod
    def forward(ctx, a, axis, keepdim):
        ctx.meta = (a.shape, axis, keepdim)
        return a.sum(axis=axis, keepdims=keepdim)

    @staticmethod
    def backward(ctx, grad):
        shape, axis, keepdim = ctx.meta
        return ctx.xp.broadcast_to(_expand_back(ctx.xp, grad, shape, axis, keepdim), shape), None, None


class Mean(Function):
    @staticmethod
    def forward(ctx, a, axis, keepdim):
        ctx.meta = (a.shape, axis, keepdim)
        return a.mean(axis=axis, keepdims=keepdim)

    @staticmethod
    def backward(ctx, grad):
        shape, axis, keepdim = ctx.meta
        g = _expand_back(ctx.xp, grad, shape, axis, keepdim) * (1.0 / max(_count(shape, axis), 1))
        return ctx.xp.broadcast_to(g.astype(grad.dtype, copy=False), shape), None, None


class Var(Function):
    """Variance with Bessel's ``correction`` (1 = unbiased, PyTorch's default)."""

    @staticmethod
    def forward(ctx, a, axis, keepdim, correction):
        mean = a.mean(axis=axis, keepdims=True)
        centered = a - mean
        n = _count(a.shape, axis)
        ctx.save_for_backward(centered)
        ctx.meta = (a.shape, axis, keepdim, n - correction)
        return (centered * centered).sum(axis=axis, keepdims=keepdim) / (n - correction)

    @staticmethod
    def backward(ctx, grad):
        centered, = ctx.saved_tensors
        shape, axis, keepdim, dof = ctx.meta
        g = _expand_back(ctx.xp, grad, shape, axis, keepdim)
        return g * centered * (2.0 / dof), None, None, None


class MaxDim(Function):
    """max/min along one dim: values, plus indices kept on ctx; the gradient goes to the chosen index."""

    @staticmethod
    def forward(ctx, a, axis, keepdim, take_min):
        xp = ctx.xp
        idx = xp.argmin(a, axis=axis) if take_min else xp.argmax(a, axis=axis)
        idx_k = xp.expand_dims(idx, axis)
        ctx.indices = idx if not keepdim else idx_k
        ctx.meta = (a.shape, a.dtype, axis, keepdim, idx_k)
        values = xp.take_along_axis(a, idx_k, axis=axis)
        return values if keepdim else values.squeeze(axis)

    @staticmethod
    def backward(ctx, grad):
        shape, dtype, axis, keepdim, idx_k = ctx.meta
        xp = ctx.xp
        out = xp.zeros(shape, dtype=grad.dtype)
        g = grad if keepdim else xp.expand_dims(grad, axis)
        full = open_grid(xp, idx_k.shape)  # out[..., idx, ...] = g along ``axis`` (put_along_axis)
        full[axis] = idx_k
        out[tuple(full)] = g
        return out, None, None, None


class Amax(Function):
    """max/min over all elements (or several dims): ties share the gradient equally (PyTorch's amax)."""

    @staticmethod
    def forward(ctx, a, axis, keepdim, take_min):
        out = a.min(axis=axis, keepdims=True) if take_min else a.max(axis=axis, keepdims=True)
        ctx.save_for_backward(a, out)
        ctx.meta = (a.shape, axis, keepdim)
        return out if keepdim else (out.reshape(()) if axis is None else out.squeeze(axis))

    @staticmethod
    def backward(ctx, grad):
        a, out = ctx.saved_tensors
        shape, axis, keepdim = ctx.meta
        mask = (a == out)
        count = mask.sum(axis=axis, keepdims=True)
        g = _expand_back(ctx.xp, grad, shape, axis, keepdim)
        return (g * mask / count).astype(grad.dtype, copy=False), None, None, None


class LogSumExp(Function):
    name = "logsumexp"

    @staticmethod
    def forward(ctx, a, axis, keepdim):
        xp = ctx.xp
        m = a.max(axis=axis, keepdims=True)
        m = xp.where(xp.isfinite(m), m, 0)
        out = xp.log(xp.exp(a - m).sum(axis=axis, keepdims=True)) + m
        ctx.save_for_backward(a, out)
        ctx.meta = (a.shape, axis, keepdim)
        if keepdim:
            return out
        return out.reshape(()) if axis is None else out.squeeze(axis)

    @staticmethod
    def backward(ctx, grad):
        a, out = ctx.saved_tensors
        shape, axis, keepdim = ctx.meta
        g = _expand_back(ctx.xp, grad, shape, axis, keepdim)
        return g * ctx.xp.exp(a - out), None, None


class Prod(Function):
    """Product along one dim (or all). The gradient uses exclusive cumulative products, so zeros are fine."""

    @staticmethod
    def forward(ctx, a, axis, keepdim):
        ctx.save_for_backward(a)
        ctx.meta = (axis, keepdim)
        return a.prod(axis=axis, keepdims=keepdim)

    @staticmethod
    def backward(ctx, grad):
        a, = ctx.saved_tensors
        axis, keepdim = ctx.meta
        xp = ctx.xp
        ax = 0 if axis is None else axis
        x = xp.moveaxis(a.reshape(-1) if axis is None else a, ax, -1)  # the reduced dim last
        ones = xp.ones_like(x[..., :1])
        # d prod / d x_i = (x_0 ... x_{i-1}) * (x_{i+1} ... x_{n-1}): products left and right of i
        left = xp.cumprod(xp.concatenate([ones, x[..., :-1]], axis=-1), axis=-1)
        right = xp.cumprod(xp.concatenate([ones, x[..., :0:-1]], axis=-1), axis=-1)[..., ::-1]
        others = xp.moveaxis(left * right, -1, ax).reshape(a.shape)
        g = _expand_back(xp, grad, a.shape, axis, keepdim)
        return g * others, None, None


class Cumsum(Function):
    @staticmethod
    def forward(ctx, a, axis):
        ctx.axis = axis
        return ctx.xp.cumsum(a, axis=axis)

    @staticmethod
    def backward(ctx, grad):
        xp, axis = ctx.xp, ctx.axis
        return xp.flip(xp.cumsum(xp.flip(grad, axis), axis=axis), axis), None
