"""Reductions over ``dim`` (an int, a tuple, or None for all), with ``keepdim`` as in PyTorch.

The public functions accept NumPy's spellings too (``axis=``, ``keepdims=``) and pass the Functions a
normalised ``dim`` (non-negative ints) and ``keepdim`` by keyword.
"""
import collections
import math

import numpy as np

from ..autograd.extensions import outside_apply
from ..autograd.function import Function
from ..backend import dtypes
from ..errors import ArgumentError, DTypeError, ShapeError
from ..tensor_base import TensorBase as Tensor  # every Tensor is one (tensor.py imports ops)
from ._args import dim_arg, norm_dim, norm_dims, wrap
from ._rules import const
from .elementwise import abs, cast, exp, maximum, minimum, pow, sqrt, where
from .indexing import open_grid


def _expand_back(grad, in_shape, dim, keepdim):
    """Reshape a reduced gradient so it broadcasts against the input again."""
    if keepdim:
        return grad
    if dim is None:
        return grad.reshape((1,) * len(in_shape))
    shape = list(grad.shape)
    for d in sorted(d % len(in_shape) for d in ((dim,) if isinstance(dim, int) else dim)):
        shape.insert(d, 1)
    return grad.reshape(shape)


def _numel(shape, dim):
    """How many elements a reduction over ``dim`` combines into each result."""
    if dim is None:
        return math.prod(shape)
    return math.prod(shape[d] for d in ((dim,) if isinstance(dim, int) else dim))


def _reduce_args(a, dim, axis, keepdim, keepdims, op):
    dim = norm_dims(dim_arg(dim, axis, op), a.ndim, op)
    if keepdims is not None:
        keepdim = keepdims
    return dim, bool(keepdim)


def _check_float(a, op):
    if a.array.dtype.kind not in dtypes.FLOAT_KINDS:
        raise DTypeError(f"{op}: input dtype should be floating point, got {a.dtype} "
                         f"(call .float() first, as in PyTorch)")


# --- sum, mean, var --------------------------------------------------------------------------------
class Sum(Function):
    @staticmethod
    def forward(ctx, a, *, dim, keepdim):
        ctx.in_shape, ctx.dim, ctx.keepdim = a.shape, dim, keepdim
        return a.sum(axis=dim, keepdims=keepdim)

    @staticmethod
    def backward(ctx, grad):
        return ctx.xp.broadcast_to(_expand_back(grad, ctx.in_shape, ctx.dim, ctx.keepdim), ctx.in_shape)

    @staticmethod
    def vjp(ctx, grad):
        return _expand_back(grad, ctx.in_shape, ctx.dim, ctx.keepdim).expand(*ctx.in_shape)

    @staticmethod
    def jvp(primals, tangents, out, dim, keepdim):
        return Sum.apply(tangents[0], dim=dim, keepdim=keepdim)


def sum(a, dim=None, keepdim=False, *, axis=None, keepdims=None, dtype=None):
    """Integer and bool tensors sum in int64, as in PyTorch."""
    dim, keepdim = _reduce_args(a, dim, axis, keepdim, keepdims, "sum")
    if dtype is not None:
        a = cast(a, dtype)
    elif a.array.dtype.kind in "biu":
        a = cast(a, dtypes.int64)
    return Sum.apply(a, dim=dim, keepdim=keepdim)


class Mean(Function):
    @staticmethod
    def forward(ctx, a, *, dim, keepdim):
        ctx.in_shape, ctx.dim, ctx.keepdim = a.shape, dim, keepdim
        return a.mean(axis=dim, keepdims=keepdim)

    @staticmethod
    def backward(ctx, grad):
        g = _expand_back(grad, ctx.in_shape, ctx.dim, ctx.keepdim) * (1.0 / (_numel(ctx.in_shape, ctx.dim) or 1))
        return ctx.xp.broadcast_to(g.astype(grad.dtype, copy=False), ctx.in_shape)

    @staticmethod
    def vjp(ctx, grad):
        g = _expand_back(grad, ctx.in_shape, ctx.dim, ctx.keepdim) * (1.0 / (_numel(ctx.in_shape, ctx.dim) or 1))
        return g.expand(*ctx.in_shape)

    @staticmethod
    def jvp(primals, tangents, out, dim, keepdim):
        return Mean.apply(tangents[0], dim=dim, keepdim=keepdim)


def mean(a, dim=None, keepdim=False, *, axis=None, keepdims=None, dtype=None):
    dim, keepdim = _reduce_args(a, dim, axis, keepdim, keepdims, "mean")
    if dtype is not None:
        a = cast(a, dtype)
    else:
        _check_float(a, "mean")
    return Mean.apply(a, dim=dim, keepdim=keepdim)


class Var(Function):
    """Variance with Bessel's ``correction`` (1 = unbiased, PyTorch's default)."""

    @staticmethod
    def forward(ctx, a, *, dim, keepdim, correction):
        centered = a - a.mean(axis=dim, keepdims=True)
        ctx.save_for_backward(centered, a)  # a: for its second derivative (vjp)
        ctx.in_shape, ctx.dim, ctx.keepdim = a.shape, dim, keepdim
        ctx.dof = _numel(a.shape, dim) - correction
        return (centered * centered).sum(axis=dim, keepdims=keepdim) / ctx.dof

    @staticmethod
    def backward(ctx, grad):
        centered, _ = ctx.saved_tensors
        return _expand_back(grad, ctx.in_shape, ctx.dim, ctx.keepdim) * centered * (2.0 / ctx.dof)

    @staticmethod
    def vjp(ctx, grad):
        _, a = ctx.saved_tensors
        centered = a - a.mean(dim=ctx.dim, keepdim=True)
        return _expand_back(grad, ctx.in_shape, ctx.dim, ctx.keepdim) * centered * (2.0 / ctx.dof)

    @staticmethod
    def jvp(primals, tangents, out, dim, keepdim, correction):
        a, t = primals[0], tangents[0]
        centered = a - a.mean(dim=dim, keepdim=True)
        return (centered * t).sum(dim=dim, keepdim=keepdim) * (2.0 / (_numel(a.shape, dim) - correction))


def var(a, dim=None, unbiased=None, keepdim=False, *, correction=None, axis=None, keepdims=None):
    dim, keepdim = _reduce_args(a, dim, axis, keepdim, keepdims, "var")
    _check_float(a, "var/std")
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    return Var.apply(a, dim=dim, keepdim=keepdim, correction=correction)


def std(a, dim=None, unbiased=None, keepdim=False, *, correction=None, axis=None, keepdims=None):
    return sqrt(var(a, dim, unbiased, keepdim, correction=correction, axis=axis, keepdims=keepdims))


def var_mean(a, dim=None, unbiased=None, keepdim=False, *, correction=None, axis=None, keepdims=None):
    """``(var(a, ...), mean(a, ...))`` over the same dims, as PyTorch's (a tuple)."""
    v = var(a, dim, unbiased, keepdim, correction=correction, axis=axis, keepdims=keepdims)
    return v, mean(a, dim, keepdim, axis=axis, keepdims=keepdims)


def std_mean(a, dim=None, unbiased=None, keepdim=False, *, correction=None, axis=None, keepdims=None):
    """``(std(a, ...), mean(a, ...))`` over the same dims, as PyTorch's (a tuple)."""
    v, m = var_mean(a, dim, unbiased, keepdim, correction=correction, axis=axis, keepdims=keepdims)
    return sqrt(v), m


# --- max, min --------------------------------------------------------------------------------------
class MaxDim(Function):
    """max/min along one dim: the values at ``index`` (the argmax/argmin, keeping the dim), which the
    public function computed once for both results; the gradient goes to that index."""

    @staticmethod
    def forward(ctx, a, *, dim, keepdim, index):
        ctx.in_shape, ctx.dim, ctx.keepdim, ctx.index = a.shape, dim, keepdim, index
        values = ctx.xp.take_along_axis(a, index, axis=dim)
        return values if keepdim else values.squeeze(dim)

    @staticmethod
    def backward(ctx, grad):
        xp, dim = ctx.xp, ctx.dim
        out = xp.zeros(ctx.in_shape, dtype=grad.dtype)
        full = open_grid(xp, ctx.index.shape)  # out[..., index, ...] = grad along ``dim`` (put_along_axis)
        full[dim] = ctx.index
        out[tuple(full)] = grad if ctx.keepdim else xp.expand_dims(grad, dim)
        return out

    @staticmethod
    def vjp(ctx, grad):
        g = grad if ctx.keepdim else grad.unsqueeze(ctx.dim)
        return where(const(ctx, _one_hot_along(ctx.xp, ctx.in_shape, ctx.index, ctx.dim)), g, 0.0)

    @staticmethod
    def jvp(primals, tangents, out, dim, keepdim, index):
        picked = tangents[0].gather(dim, const(out, index))
        return picked if keepdim else picked.squeeze(dim)


def _one_hot_along(xp, shape, index, dim):
    """A bool array of ``shape``, True where ``index`` (keeping ``dim``) points along ``dim``."""
    along = xp.arange(shape[dim]).reshape((1,) * dim + (-1,) + (1,) * (len(shape) - dim - 1))
    return index == along


class Amax(Function):
    """max/min over all elements (or several dims): ties share the gradient equally (PyTorch's amax)."""

    @staticmethod
    def forward(ctx, a, *, dim, keepdim, take_min):
        out = a.min(axis=dim, keepdims=True) if take_min else a.max(axis=dim, keepdims=True)
        ctx.save_for_backward(a, out)
        ctx.in_shape, ctx.dim, ctx.keepdim = a.shape, dim, keepdim
        return out if keepdim else (out.reshape(()) if dim is None else out.squeeze(dim))

    @staticmethod
    def backward(ctx, grad):
        a, out = ctx.saved_tensors
        mask = (a == out)
        count = mask.sum(axis=ctx.dim, keepdims=True)
        g = _expand_back(grad, ctx.in_shape, ctx.dim, ctx.keepdim)
        return (g * mask / count).astype(grad.dtype, copy=False)

    @staticmethod
    def vjp(ctx, grad):
        a, out = ctx.node.saved_tensors
        share = const(ctx, (a == out) / (a == out).sum(axis=ctx.dim, keepdims=True))
        return _expand_back(grad, ctx.in_shape, ctx.dim, ctx.keepdim) * share

    @staticmethod
    def jvp(primals, tangents, out, dim, keepdim, take_min):
        a = primals[0].array
        pick = a.min(axis=dim, keepdims=True) if take_min else a.max(axis=dim, keepdims=True)
        share = const(out, ((a == pick) / (a == pick).sum(axis=dim, keepdims=True)).astype(a.dtype))
        return (tangents[0] * share).sum(dim=dim, keepdim=keepdim)


MaxResult = collections.namedtuple("max", ["values", "indices"])
MinResult = collections.namedtuple("min", ["values", "indices"])


def _max_min(a, dim, keepdim, axis, keepdims, other, op):
    take_min = op == "min"
    if isinstance(dim, Tensor):  # torch.max(a, b) is maximum
        other, dim = dim, None
    if other is not None:
        return minimum(a, other) if take_min else maximum(a, other)
    dim, keepdim = _reduce_args(a, dim, axis, keepdim, keepdims, op)
    if a.array.size == 0:
        raise ShapeError(f"{op}: cannot reduce an empty tensor of shape {tuple(a.shape)}")
    if dim is None or isinstance(dim, tuple):
        return Amax.apply(a, dim=dim, keepdim=keepdim, take_min=take_min)
    xp = a.device.xp
    index = xp.expand_dims((xp.argmin if take_min else xp.argmax)(a.array, axis=dim), dim)
    values = MaxDim.apply(a, dim=dim, keepdim=keepdim, index=index)
    indices = wrap((index if keepdim else index.squeeze(dim)).astype(np.int64, copy=False), a.device)
    return (MinResult if take_min else MaxResult)(values, indices)


@outside_apply
def max(a, dim=None, keepdim=False, *, axis=None, keepdims=None, other=None):
    """``max(a)`` → scalar; ``max(a, dim)`` → (values, indices); ``max(a, b)`` → maximum."""
    return _max_min(a, dim, keepdim, axis, keepdims, other, "max")


@outside_apply
def min(a, dim=None, keepdim=False, *, axis=None, keepdims=None, other=None):
    """``min(a)`` → scalar; ``min(a, dim)`` → (values, indices); ``min(a, b)`` → minimum."""
    return _max_min(a, dim, keepdim, axis, keepdims, other, "min")


def amax(a, dim=None, keepdim=False, *, axis=None, keepdims=None):
    dim, keepdim = _reduce_args(a, dim, axis, keepdim, keepdims, "amax")
    return Amax.apply(a, dim=dim, keepdim=keepdim, take_min=False)


def amin(a, dim=None, keepdim=False, *, axis=None, keepdims=None):
    dim, keepdim = _reduce_args(a, dim, axis, keepdim, keepdims, "amin")
    return Amax.apply(a, dim=dim, keepdim=keepdim, take_min=True)


def _arg_reduce(a, dim, keepdim, axis, op):
    dim = dim_arg(dim, axis, op)
    dim = None if dim is None else norm_dim(dim, a.ndim, op)
    xp = a.device.xp
    try:
        res = (xp.argmin if op == "argmin" else xp.argmax)(a.array, axis=dim)
    except ValueError:
        raise ShapeError(f"{op}: cannot reduce an empty dim (shape {tuple(a.shape)}, dim {dim})") from None
    if dim is None:
        res = xp.asarray(res, dtype=np.int64).reshape((1,) * a.ndim if keepdim else ())
    elif keepdim:
        res = xp.expand_dims(res, dim)
    return wrap(res.astype(np.int64, copy=False), a.device)


@outside_apply
def argmax(a, dim=None, keepdim=False, *, axis=None):
    return _arg_reduce(a, dim, keepdim, axis, "argmax")


@outside_apply
def argmin(a, dim=None, keepdim=False, *, axis=None):
    return _arg_reduce(a, dim, keepdim, axis, "argmin")


# --- logsumexp, prod, cumsum, norm -----------------------------------------------------------------
class LogSumExp(Function):
    name = "logsumexp"

    @staticmethod
    def forward(ctx, a, *, dim, keepdim):
        xp = ctx.xp
        m = a.max(axis=dim, keepdims=True)
        m = xp.where(xp.isfinite(m), m, 0)
        out = xp.log(xp.exp(a - m).sum(axis=dim, keepdims=True)) + m
        ctx.save_for_backward(a, out)
        ctx.in_shape, ctx.dim, ctx.keepdim = a.shape, dim, keepdim
        if keepdim:
            return out
        return out.reshape(()) if dim is None else out.squeeze(dim)

    @staticmethod
    def backward(ctx, grad):
        a, out = ctx.saved_tensors
        return _expand_back(grad, ctx.in_shape, ctx.dim, ctx.keepdim) * ctx.xp.exp(a - out)

    @staticmethod
    def vjp(ctx, grad):
        a, _ = ctx.saved_tensors  # the softmax again from ``a``, so that it is differentiable
        return _expand_back(grad, ctx.in_shape, ctx.dim, ctx.keepdim) * exp(a - a.logsumexp(ctx.dim, True))

    @staticmethod
    def jvp(primals, tangents, out, dim, keepdim):
        a, t = primals[0], tangents[0]
        return (t * exp(a - a.logsumexp(dim, True))).sum(dim=dim, keepdim=keepdim)


def logsumexp(a, dim=None, keepdim=False, *, axis=None, keepdims=None):
    dim, keepdim = _reduce_args(a, dim, axis, keepdim, keepdims, "logsumexp")
    if a.array.dtype.kind != "f":
        a = cast(a, dtypes.default_float)
    return LogSumExp.apply(a, dim=dim, keepdim=keepdim)


class Prod(Function):
    """Product along one dim (or all). The gradient uses exclusive cumulative products, so zeros are fine."""

    @staticmethod
    def forward(ctx, a, *, dim, keepdim):
        ctx.save_for_backward(a)
        ctx.dim, ctx.keepdim = dim, keepdim
        return a.prod(axis=dim, keepdims=keepdim)

    @staticmethod
    def backward(ctx, grad):
        a, = ctx.saved_tensors
        xp, dim = ctx.xp, ctx.dim
        d = 0 if dim is None else dim
        x = xp.moveaxis(a.reshape(-1) if dim is None else a, d, -1)  # the reduced dim last
        ones = xp.ones_like(x[..., :1])
        # d prod / d x_i = (x_0 ... x_{i-1}) * (x_{i+1} ... x_{n-1}): products left and right of i
        left = xp.cumprod(xp.concatenate([ones, x[..., :-1]], axis=-1), axis=-1)
        right = xp.cumprod(xp.concatenate([ones, x[..., :0:-1]], axis=-1), axis=-1)[..., ::-1]
        others = xp.moveaxis(left * right, -1, d).reshape(a.shape)
        return _expand_back(grad, a.shape, dim, ctx.keepdim) * others

    @staticmethod
    def vjp(ctx, grad):
        a, = ctx.saved_tensors
        return _expand_back(grad, a.shape, ctx.dim, ctx.keepdim) * _prod_of_others(a, ctx.dim)

    @staticmethod
    def jvp(primals, tangents, out, dim, keepdim):
        a, t = primals[0], tangents[0]
        return (t * _prod_of_others(a, dim)).sum(dim=dim, keepdim=keepdim)


def _prod_of_others(a, dim):
    """For each element, the product of the others along ``dim`` (all when None), in Tensor ops: each is a
    product over a row where the element itself is replaced by 1 (n^2 work: for higher order only)."""
    x = a.reshape(-1) if dim is None else a.transpose(dim, -1)
    n = x.shape[-1]
    rows = x.unsqueeze(-2).expand(*x.shape[:-1], n, n)
    others = where(const(a, a.device.xp.eye(n, dtype=bool)), 1.0, rows).prod(dim=-1)
    return others.reshape(a.shape) if dim is None else others.transpose(dim, -1)


def prod(a, dim=None, keepdim=False, *, axis=None, keepdims=None):
    dim, keepdim = _reduce_args(a, dim, axis, keepdim, keepdims, "prod")
    if isinstance(dim, tuple):
        raise ArgumentError("prod: dim must be a single int (as in PyTorch)")
    return Prod.apply(a, dim=dim, keepdim=keepdim)


class Cumsum(Function):
    @staticmethod
    def forward(ctx, a, *, dim):
        ctx.dim = dim
        return ctx.xp.cumsum(a, axis=dim)

    @staticmethod
    def backward(ctx, grad):
        xp, dim = ctx.xp, ctx.dim
        return xp.flip(xp.cumsum(xp.flip(grad, dim), axis=dim), dim)

    @staticmethod
    def vjp(ctx, grad):
        return grad.flip(ctx.dim).cumsum(ctx.dim).flip(ctx.dim)

    @staticmethod
    def jvp(primals, tangents, out, dim):
        return Cumsum.apply(tangents[0], dim=dim)


def cumsum(a, dim=None, *, axis=None):
    dim = dim_arg(dim, axis, "cumsum")
    if dim is None:
        raise ArgumentError("cumsum: dim is required")
    return Cumsum.apply(a, dim=norm_dim(dim, a.ndim, "cumsum"))


def norm(a, p=2, dim=None, keepdim=False):
    """The p-norm over ``dim`` (all elements by default), composed from differentiable ops."""
    if p == 2:
        return sqrt(sum(a * a, dim, keepdim))
    if p == 1:
        return sum(abs(a), dim, keepdim)
    return pow(sum(pow(abs(a), p), dim, keepdim), 1.0 / p)


class ReduceMethods:
    """Tensor's reductions (``x.sum(dim=1)``): a mixin of ``Tensor``."""
    __slots__ = ()
    sum, mean, var, std, prod, cumsum, norm, logsumexp = sum, mean, var, std, prod, cumsum, norm, logsumexp
    var_mean, std_mean = var_mean, std_mean
    max, min, amax, amin, argmax, argmin = max, min, amax, amin, argmax, argmin
