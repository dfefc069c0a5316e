"""In-place ops (``add_``, ``x[i] = v``, ``fill_``, ``copy_``...): writing into a tensor's storage safely.

A module of its own because in-place writes are where autograd's bookkeeping lives, not maths: every write
bumps the storage's version counter (so a backward that saved the old values refuses to run), leaves that
require grad are refused, a tracked write computes from a snapshot and rebases the tensor onto the
result's graph, and an untracked arithmetic write uses the ufunc's ``out=`` so no full-size temporary is
made. The maths of each op stays in its own module: these functions run it and write its result.
"""
import numpy as np

from ..autograd import grad_mode
from ..backend import dtypes
from ..errors import AutogradError, DeviceError, DTypeError, OpIndexError, ShapeError
from ..random import host_rng
from ..tensor_base import TensorBase as Tensor  # every Tensor is one (tensor.py imports ops)
from ._args import NUMBER, as_tensor_like, operand, operand_data
from .elementwise import add, cast, clamp, clone, div, mul, pow, sub
from .indexing import SetItem, convert_index, masked_fill, scatter as _scatter
from .shape import expand
from .transfer import move_array, to_device

_grad_enabled = grad_mode.is_grad_enabled
_INPLACE_UFUNCS = {"add": "add", "sub": "subtract", "mul": "multiply", "div": "divide"}


def bump(t):
    """Record that ``t``'s storage changed (every view of it shares the counter)."""
    t._version_counter.bump()
    return t


def _check_inplace(t, op):
    if t.requires_grad and t.grad_fn is None and _grad_enabled():
        raise AutogradError(f"{op}: a leaf tensor that requires grad is used in an in-place operation "
                            f"(do it under mg.no_grad(), or work on a clone)")


def _check_writable(t, op):
    if not getattr(t.array.flags, "writeable", True):
        raise ShapeError(f"{op}: the tensor of shape {tuple(t.shape)} is a broadcast view (expand) whose "
                         f"elements share memory; clone() it before writing in place")


def _check_result_shape(t, result, op):
    if result.shape != t.shape:
        raise ShapeError(f"{op}: output of shape {tuple(result.shape)} can't be written into a tensor of "
                         f"shape {tuple(t.shape)}")


def _write(t, index, values, op):
    """``t.array[index] = values``, then bump the version; NumPy's complaints become minigrad errors."""
    _check_writable(t, op)
    try:
        t.array[index] = values
    except IndexError as e:
        raise OpIndexError(f"{op}: {e} (tensor shape {tuple(t.shape)})") from None
    except (ValueError, TypeError) as e:
        raise ShapeError(f"{op}: {e} (tensor shape {tuple(t.shape)})") from None
    if getattr(t, "_fw", None) is not None:   # a value written outside any op: no tangent (``_rebase`` sets
        t._fw = None                          # the op's back right after)
    return bump(t)


def _rebase(t, result, op):
    """Make the in-place op's result ``t``'s new value and history."""
    if getattr(t, "_is_view", False):
        raise AutogradError(f"{op}: in-place autograd on a view is not supported by minigrad; "
                            f"use an out-of-place op")
    _check_result_shape(t, result, op)
    if result.array.dtype != t.array.dtype:
        result = cast(result, t.dtype)
    _write(t, ..., result.array, op)
    t.grad_fn = result.grad_fn
    t.requires_grad = result.requires_grad
    t._fw = getattr(result, "_fw", None)   # forward mode: the result's tangent (autograd/forward_ad.py)
    return t


def _dual(*xs):
    """Does one of ``xs`` carry a forward-mode tangent? Then the write goes the recorded way, so the op's
    JVP rule runs and ``_rebase`` moves the tangent onto the tensor."""
    return any(getattr(x, "_fw", None) is not None for x in xs if isinstance(x, Tensor))


def _snapshot(t):
    """A private copy of ``t`` that keeps its history. A recorded in-place op computes from (and may save
    for its backward) this copy, so writing the result into ``t``'s storage can't corrupt what it saved."""
    s = Tensor._make(t.array.copy(), t.device, t.requires_grad)
    s.grad_fn = t.grad_fn
    s._fw = getattr(t, "_fw", None)
    return s


def inplace(t, fn, *args):
    """Run ``fn(t, *args)`` and write the result into ``t`` (``add_``, ``mul_``, ``clamp_``...)."""
    op = fn.__name__ + "_"
    _check_inplace(t, op)
    tracking = _grad_enabled() and (t.requires_grad or any(isinstance(x, Tensor) and x.requires_grad
                                                         for x in args))
    if tracking or _dual(t, *args):
        snap = _snapshot(t)
        return _rebase(t, fn(snap, *(snap if a is t else a for a in args)), op)
    ufunc = _INPLACE_UFUNCS.get(fn.__name__)
    if ufunc is not None and len(args) == 1:  # add_/sub_/mul_/div_: truly in place, no temporary
        return _ufunc_inplace(t, ufunc, args[0], op)
    with grad_mode.no_grad():
        result = fn(t, *args)
    _check_result_shape(t, result, op)
    if not np.can_cast(result.array.dtype, t.array.dtype, "same_kind"):
        raise DTypeError(f"{op}: result type {result.dtype} can't be cast to the tensor's dtype {t.dtype}")
    return _write(t, ..., result.array, op)


def _ufunc_inplace(t, ufunc, other, op):
    """``t op= other`` with the ufunc's ``out=`` (as PyTorch's in-place ops: no full-size temporary)."""
    other = other if isinstance(other, NUMBER) else operand_data(other, t, op)
    _check_writable(t, op)
    try:
        getattr(t.device.xp, ufunc)(t.array, other, out=t.array, casting="same_kind")
    except TypeError:
        if isinstance(other, float) or (ufunc == "divide" and t.array.dtype.kind in "biu"):
            result = dtypes.default_float.name   # int tensor and a Python float: float32, as in PyTorch
        else:
            result = np.result_type(t.array.dtype, other).name
        raise DTypeError(f"{op}: result type {result} can't be cast to the tensor's dtype "
                         f"{t.dtype.name}") from None
    except ValueError:
        raise ShapeError(f"{op}: output of shape {tuple(np.broadcast_shapes(t.shape, np.shape(other)))} "
                         f"can't be written into a tensor of shape {tuple(t.shape)}") from None
    return bump(t)


def setitem_(t, index, value):
    """``t[index] = value``; differentiable through ``SetItem`` when ``t`` or ``value`` requires grad."""
    _check_inplace(t, "setitem")
    idx = convert_index(index, t)
    if isinstance(value, Tensor) and value.device != t.device:
        raise DeviceError(f"setitem: value on {value.device} for a tensor on {t.device}")
    if _grad_enabled() and (t.requires_grad or (isinstance(value, Tensor) and value.requires_grad)) \
            or _dual(t, value):
        v = value if isinstance(value, Tensor) else operand(value, t)
        if isinstance(v, Tensor) and v.array.dtype != t.array.dtype:
            v = cast(v, t.dtype)  # the gradient is cast back to the value's dtype
        return _rebase(t, SetItem.apply(t, v, index=idx), "setitem")
    return _write(t, idx, value.array if isinstance(value, Tensor) else value, "setitem")


def fill_(t, value):
    _check_inplace(t, "fill_")
    return _write(t, ..., value.item() if isinstance(value, Tensor) else value, "fill_")


def copy_(t, src):
    """Copy ``src``'s values (broadcast, cast and moved to ``t``'s device) into ``t``."""
    _check_inplace(t, "copy_")
    if not isinstance(src, Tensor):
        src = as_tensor_like(src, t)
    if _grad_enabled() and src.requires_grad:
        moved = cast(src if src.device == t.device else to_device(src, t.device), t.dtype)
        return _rebase(t, expand(moved, *t.shape) + 0 if moved.shape != t.shape else clone(moved), "copy_")
    data = src.array if src.device == t.device else move_array(src.array, src.device, t.device)
    return _write(t, ..., data, "copy_")


def scatter_(t, dim, index, src=None, *, value=None, reduce=None):
    """In-place ``scatter`` (``reduce``: None, 'add' or 'multiply')."""
    def scatter(x, src):
        return _scatter(x, dim, index, src, value=value, reduce=reduce)
    return inplace(t, scatter, src)


def fill_diagonal_(t, fill_value, wrap=False):
    """Write ``fill_value`` on the main diagonal (every dim of an N-D ``t`` must have the same size; a tall
    matrix's diagonal restarts after each ``cols + 1`` rows when ``wrap``: NumPy's fill_diagonal)."""
    if t.ndim < 2 or (t.ndim > 2 and len(set(t.shape)) > 1):
        raise ShapeError(f"fill_diagonal_: needs a 2-D tensor or one whose dims are all equal, got shape "
                         f"{tuple(t.shape)}")
    if t.ndim == 2:
        step, end = t.shape[1] + 1, t.numel() if wrap else min(t.numel(), t.shape[1] * t.shape[1])
    else:
        step, end = 1 + int(np.cumprod(t.shape[:-1]).sum()), t.numel()
    return setitem_(t, np.unravel_index(np.arange(0, end, step), t.shape), fill_value)


def random_fill_(t, kind, a, b, generator):
    """``uniform_(a, b)`` or ``normal_(mean=a, std=b)``, drawn on the host from ``generator``."""
    _check_inplace(t, kind + "_")
    rng = host_rng(generator)
    host = rng.uniform(a, b, t.shape) if kind == "uniform" else rng.normal(a, b, t.shape)
    return _write(t, ..., t.device.backend.asarray(host.astype(t.array.dtype)), kind + "_")


class InplaceMethods:
    """Tensor's in-place methods (``x.add_(y)``, ``x += y``, ``x[i] = v``): a mixin of ``Tensor``."""
    __slots__ = ()
    __setitem__, copy_, fill_ = setitem_, copy_, fill_

    def add_(self, other, alpha=1):
        return inplace(self, add, other if alpha == 1 else other * alpha)

    def sub_(self, other, alpha=1):
        return inplace(self, sub, other if alpha == 1 else other * alpha)

    def mul_(self, other):
        return inplace(self, mul, other)

    def div_(self, other):
        return inplace(self, div, other)

    def pow_(self, other):
        return inplace(self, pow, other)

    def clamp_(self, min=None, max=None):
        return inplace(self, clamp, min, max)

    clip_ = clamp_
    __iadd__, __isub__, __imul__, __itruediv__ = add_, sub_, mul_, div_

    def masked_fill_(self, mask, value):
        return inplace(self, masked_fill, mask, value)

    scatter_, fill_diagonal_ = scatter_, fill_diagonal_

    def zero_(self):
        return fill_(self, 0)

    def uniform_(self, a=0.0, b=1.0, generator=None):
        return random_fill_(self, "uniform", a, b, generator)

    def normal_(self, mean=0.0, std=1.0, generator=None):
        return random_fill_(self, "normal", mean, std, generator)
