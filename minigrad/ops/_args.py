"""Argument handling shared by every op module: dims, operands, and tensors made from plain arrays.

Used by the public functions of ``ops/*.py`` and ``ops/nn/*.py`` (and by ``Tensor.stride``). It is split out
so that each op module holds its ops only, and so that every op follows the same rules with the same
messages: one way to read a ``dim`` (negative dims, NumPy's ``axis`` alias, 0-d tensors as in PyTorch), one
way to turn lists, arrays and NumPy scalars into operands, and one way to wrap an array that no Function
produced (a comparison, an argmax, pooling indices) so that it reaches the memory pool's storage hook
exactly as ``Function.apply``'s results do.
"""
import numpy as np

from ..backend.device import get_backend
from ..errors import ArgumentError, DeviceError, OpIndexError, ShapeError
from ..tensor_base import TensorBase as Tensor, tensor  # every Tensor is one (tensor.py imports ops)

NUMBER = (int, float, bool)
PY_NUMBERS = frozenset((int, float, bool))  # exact types: np.float64 subclasses float but must be unwrapped


# --- dims ------------------------------------------------------------------------------------------
def dim_arg(dim, axis, op):
    """``dim``, or its NumPy alias ``axis``; a list becomes a tuple."""
    if axis is not None:
        if dim is not None:
            raise ArgumentError(f"{op}: got both dim and axis")
        dim = axis
    return tuple(dim) if isinstance(dim, list) else dim


def norm_dim(dim, ndim, op):
    """One dim (an int, possibly negative) -> 0..ndim-1. A 0-d tensor accepts 0 and -1, as in PyTorch."""
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise ArgumentError(f"{op}: dim must be an int, got {dim!r}")
    n = ndim or 1
    if not -n <= dim < n:
        raise OpIndexError(f"{op}: dim {dim} is out of range for a tensor with {ndim} dims "
                           f"(expected to be in [{-n}, {n - 1}])")
    return int(dim) % n


def norm_dims(dim, ndim, op):
    """For reductions: None (every dim), one dim, or a tuple of dims, each made non-negative."""
    if dim is None:
        return None
    if isinstance(dim, tuple):
        return tuple(norm_dim(d, ndim, op) for d in dim)
    return norm_dim(dim, ndim, op)


def dim_of(a, dim, op):
    """``norm_dim`` for ops that need a real dim to work along: a 0-d tensor has none."""
    if a.ndim == 0:
        raise ShapeError(f"{op}: needs a tensor with at least 1 dim, got a 0-d tensor")
    return norm_dim(dim, a.ndim, op)


# --- operands --------------------------------------------------------------------------------------
def as_tensor_like(value, ref):
    """A tensor on ``ref``'s device from a number, list or array (used for mixed operands)."""
    if isinstance(value, Tensor):
        return value
    arr = np.asarray(value)
    dt = ref.array.dtype if arr.dtype.kind == "f" and ref.array.dtype.kind in "fV" else None   # V: bfloat16
    return tensor(arr, dtype=dt, device=ref.device)


def operand(value, ref):
    """What a Function takes as an operand next to the tensor ``ref``: a Tensor or a Python number as it
    is, a NumPy scalar as a Python number, anything else (list, array) as a tensor like ``ref``."""
    if isinstance(value, Tensor) or isinstance(value, NUMBER):
        return value
    if isinstance(value, np.generic):
        return value.item()
    return as_tensor_like(value, ref)


def operand_data(value, ref, op):
    """``operand`` unwrapped to an array or a number, for ops computed without a Function."""
    if isinstance(value, Tensor):
        if value.device != ref.device:
            raise DeviceError(f"{op}: tensors on different devices ({ref.device}, {value.device})")
        return value.array
    value = operand(value, ref)
    return value.array if isinstance(value, Tensor) else value


# --- results ---------------------------------------------------------------------------------------
def wrap(array, dev):
    """A Tensor (no gradient) on ``dev`` around an array that no Function produced, made that device's
    storage through the backend's hook (the memory pool, when installed), as Function.apply does."""
    be = dev.backend or get_backend(dev)
    if type(array) is not be.array_type:
        array = be.asarray(array)
    return Tensor._make(be.adopt(array), dev)


def share_version(out, src):
    """``out`` views ``src``'s storage: in-place changes to either must bump one counter."""
    base = out.array.base
    if base is not None and (base is src.array or base is src.array.base):
        out._version_counter = src._version_counter
        out._is_view = True
    return out


# --- floating-point edge cases ---------------------------------------------------------------------
def quiet():
    """``with quiet():`` around maths whose edge cases are part of the op (log(0) = -inf, a gradient
    g / 2 sqrt(0) = inf, a fully masked softmax row = NaN): NumPy would warn there, PyTorch is silent. Only
    where it is cheap next to the op's work; an ordinary ``x / 0`` still warns (an errstate costs ~1 us, as
    much as a small division)."""
    return np.errstate(divide="ignore", invalid="ignore", over="ignore")


def shape_arg(shape):
    """``f(2, 3)`` and ``f((2, 3))`` alike: a tuple of ints."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return tuple(int(s) for s in shape)
