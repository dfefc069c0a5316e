"""The op library as functions (``mg.add``, ``mg.sum``...) and the glue Tensor methods call.

Each function validates and normalises arguments (``dim``/``axis``, ``keepdim``/``keepdims``), then calls
one Function's ``apply``. The maths of every op is in the modules next to this one.
"""
import builtins
import collections

import numpy as np

from ..autograd import grad_mode
from ..autograd.function import Edge
from ..backend import dtypes
from ..backend.device import device as _device, get_backend
from ..errors import (ArgumentError, AutogradError, DeviceError, DTypeError, OpIndexError, ShapeError)
from ..tensor import Tensor
from . import elementwise as E, indexing as I, linalg as L, reduce as R, shape as S

_grad = grad_mode._state
_NUMBER = (int, float, bool)
_PY_NUMBERS = frozenset((int, float, bool))  # exact types: np.float64 subclasses float but must be unwrapped


# --- helpers ---------------------------------------------------------------------------------------
def as_tensor_like(value, ref):
    """A tensor on ``ref``'s device from a number, list or array (used for mixed operands)."""
    if isinstance(value, Tensor):
        return value
    from ..tensor import tensor
    arr = np.asarray(value)
    dt = ref.data.dtype if arr.dtype.kind == "f" and ref.data.dtype.kind == "f" else None
    return tensor(arr, dtype=dt, device=ref.device)


def _operand(value, ref):
    if isinstance(value, Tensor) or isinstance(value, _NUMBER):
        return value
    if isinstance(value, np.generic):
        return value.item()
    return as_tensor_like(value, ref)


def _wrap(array, dev):
    """Non-differentiable result array → Tensor on ``dev`` (through the storage hook)."""
    be = dev.backend or get_backend(dev)
    if type(array) is not be.array_type:
        array = be.asarray(array)
    if be.allocator is not None:
        array = be.adopt(array)
    return Tensor._make(array, dev)


def _fix_float64(out, *inputs):
    """int tensor ∘ Python float gives float64 in NumPy; PyTorch gives the default float32."""
    if out.data.dtype.char == "d" and not builtins.any(
            isinstance(x, Tensor) and x.data.dtype.char == "d" for x in inputs):
        return cast(out, dtypes.default_float)
    return out


def _dim(dim, axis, op):
    """``dim``, or its NumPy alias ``axis``; a list becomes a tuple."""
    if axis is not None:
        if dim is not None:
            raise ArgumentError(f"{op}: got both dim and axis")
        dim = axis
    if isinstance(dim, list):
        dim = tuple(dim)
    return dim


def _norm_dim(dim, ndim, op):
    """Validate and make non-negative one dim or a tuple of dims."""
    if dim is None:
        return None
    if isinstance(dim, tuple):
        return tuple(_norm_dim(d, ndim, op) for d in dim)
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise ArgumentError(f"{op}: dim must be an int or a tuple of ints, got {dim!r}")
    n = builtins.max(ndim, 1)
    if not -n <= dim < n:
        raise OpIndexError(f"{op}: dim {dim} is out of range for a tensor with {ndim} dims")
    return int(dim) % n if ndim else 0


def _dim_of_nd(a, dim, op):
    """Like _norm_dim, for ops that need a real dim (a 0-d tensor has none)."""
    if a.ndim == 0:
        raise ShapeError(f"{op}: needs a tensor with at least 1 dim, got a 0-d tensor")
    return _norm_dim(dim, a.ndim, op)


def _share_version(out, src):
    """``out`` views ``src``'s storage: in-place changes to either must bump one counter."""
    base = out.data.base
    if base is not None and (base is src.data or base is src.data.base):
        out._vc = src._vc
        out._is_view = True
    return out


# --- elementwise -----------------------------------------------------------------------------------
def add(a, b, alpha=1):
    if alpha != 1:
        b = mul(b, alpha)
    if not isinstance(a, Tensor):
        a, b = b, a
    out = E.Add.apply(a, b if isinstance(b, Tensor) or type(b) in _PY_NUMBERS else _operand(b, a))
    return out if out.data.dtype.char != "d" else _fix_float64(out, a, b)


def sub(a, b, alpha=1):
    if alpha != 1:
        b = mul(b, alpha)
    if not isinstance(a, Tensor):
        return rsub(b, a)
    out = E.Sub.apply(a, _operand(b, a))
    return out if out.data.dtype.char != "d" else _fix_float64(out, a, b)


def rsub(a, other):
    """other - a"""
    out = E.Sub.apply(_operand(other, a), a)
    return out if out.data.dtype.char != "d" else _fix_float64(out, a, other)


def mul(a, b):
    if not isinstance(a, Tensor):
        a, b = b, a
    out = E.Mul.apply(a, b if isinstance(b, Tensor) or type(b) in _PY_NUMBERS else _operand(b, a))
    return out if out.data.dtype.char != "d" else _fix_float64(out, a, b)


def div(a, b):
    if not isinstance(a, Tensor):
        return rdiv(b, a)
    out = E.Div.apply(a, _operand(b, a))
    return out if out.data.dtype.char != "d" else _fix_float64(out, a, b)


true_divide = divide = div


def rdiv(a, other):
    """other / a"""
    out = E.Div.apply(_operand(other, a), a)
    return out if out.data.dtype.char != "d" else _fix_float64(out, a, other)


def neg(a):
    return E.Neg.apply(a)


negative = neg


def pow(a, exponent):
    if not isinstance(a, Tensor):
        return rpow(exponent, a)
    out = E.Pow.apply(a, _operand(exponent, a))
    return out if out.data.dtype.char != "d" else _fix_float64(out, a, exponent)


def rpow(a, base):
    """base ** a"""
    out = E.Pow.apply(_operand(base, a), a)
    return out if out.data.dtype.char != "d" else _fix_float64(out, a, base)


def _unary(Op):
    def fn(a):
        out = Op.apply(a)
        return out if out.data.dtype.char != "d" else _fix_float64(out, a)
    fn.__name__ = Op.name
    fn.__doc__ = f"Elementwise {Op.name} (differentiable)."
    return fn


exp, log, sqrt, abs, sin, cos = (_unary(op) for op in (E.Exp, E.Log, E.Sqrt, E.Abs, E.Sin, E.Cos))


def square(a):
    return mul(a, a)


def rsqrt(a):
    return div(1.0, sqrt(a))


def clamp(a, min=None, max=None):
    if min is None and max is None:
        raise ArgumentError("clamp: at least one of min and max must be given")
    lo = min if min is None or isinstance(min, _NUMBER) else _operand(min, a)
    hi = max if max is None or isinstance(max, _NUMBER) else _operand(max, a)
    return E.Clamp.apply(a, lo, hi)


clip = clamp


def maximum(a, b):
    return E.Maximum.apply(a, _operand(b, a))


def minimum(a, b):
    return E.Minimum.apply(a, _operand(b, a))


def where(condition, a, b):
    ref = next((x for x in (a, b, condition) if isinstance(x, Tensor)), None)
    if ref is None:
        raise ArgumentError("where: at least one argument must be a Tensor")
    cond = condition if isinstance(condition, Tensor) else as_tensor_like(condition, ref)
    if cond.data.dtype.kind != "b":
        raise DTypeError(f"where: condition must be a bool tensor, got {cond.dtype}")
    a = _operand(a, ref)
    b = _operand(b, ref)
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        return _wrap(cond.device.xp.where(cond.data, a, b), cond.device)
    return E.Where.apply(cond, a, b)


def cast(a, dtype):
    dt = dtypes.to_dtype(dtype)
    if dt.np_dtype == a.data.dtype:
        return a
    return E.Cast.apply(a, dt.np_dtype)


def clone(a):
    return E.Clone.apply(a)


class ToDevice(E.Function):
    """Move to another device; the gradient moves back."""
    name = "to"

    @staticmethod
    def forward(ctx, a, src, dst):
        ctx.devices = (src, dst)
        host = get_backend(src).to_host(a)
        return get_backend(dst).asarray(host)

    @staticmethod
    def backward(ctx, grad):
        src, dst = ctx.devices
        return get_backend(src).asarray(get_backend(dst).to_host(grad)), None, None


def to_device(a, dev):
    """Copy to ``dev``; differentiable (the gradient is copied back). Not a Function.apply: the output
    lives on another device than the input, so the node is built by hand here."""
    dev = _device(dev)
    be = get_backend(dev)  # raises a clear error if the device is unavailable
    arr = be.asarray(get_backend(a.device).to_host(a.data))
    if be.allocator is not None:
        arr = be.adopt(arr)
    out = Tensor._make(arr, dev)
    if a.requires_grad and _grad.enabled:
        node = ToDevice.__new__(ToDevice)
        node.xp, node.device, node._saved = be.xp, dev, ()
        node.needs_input_grad = (True, False, False)
        node.devices = (a.device, dev)
        node.next = (Edge((a.grad_fn or a._accumulator(), a.data.shape, a.data.dtype)), None, None)
        out.requires_grad = True
        out.grad_fn = node
    return out


# --- comparisons and logic (no gradient) -----------------------------------------------------------
def _compare(fn_name):
    def fn(a, b):
        if not isinstance(a, Tensor):
            raise ArgumentError(f"{fn_name}: first argument must be a Tensor")
        if isinstance(b, Tensor):
            if b.device != a.device:
                raise DeviceError(f"{fn_name}: tensors on different devices ({a.device}, {b.device})")
            bd = b.data
        else:
            bd = _operand(b, a)
            bd = bd.data if isinstance(bd, Tensor) else bd
        try:
            res = getattr(a.device.xp, fn_name)(a.data, bd)
        except ValueError as e:
            raise ShapeError(f"{fn_name}: {e} (shapes {tuple(a.shape)}, {tuple(getattr(bd, 'shape', ()))})") \
                from None
        except TypeError as e:
            raise DTypeError(f"{fn_name}: {e} (dtypes {a.dtype}, {getattr(b, 'dtype', type(b).__name__)})") \
                from None
        return _wrap(res, a.device)
    fn.__name__ = fn_name
    return fn


_np_names = dict(lt="less", le="less_equal", gt="greater", ge="greater_equal", eq="equal", ne="not_equal",
                 logical_and="logical_and", logical_or="logical_or", logical_xor="logical_xor",
                 floor_divide="floor_divide", remainder="remainder")
lt, le, gt, ge, eq, ne = (_compare(_np_names[n]) for n in ("lt", "le", "gt", "ge", "eq", "ne"))
less, less_equal, greater, greater_equal, equal_elementwise, not_equal = lt, le, gt, ge, eq, ne
logical_and, logical_or, logical_xor = (_compare(n) for n in ("logical_and", "logical_or", "logical_xor"))
floor_divide, remainder = _compare("floor_divide"), _compare("remainder")


def logical_not(a):
    if a.data.dtype.kind != "b":
        raise DTypeError(f"logical_not (~): expected a bool tensor, got {a.dtype}")
    return _wrap(~a.data, a.device)


def isnan(a):
    return _wrap(a.device.xp.isnan(a.data), a.device)


def isinf(a):
    return _wrap(a.device.xp.isinf(a.data), a.device)


def isfinite(a):
    return _wrap(a.device.xp.isfinite(a.data), a.device)


def sign(a):
    return _wrap(a.data.copy() if a.data.dtype.kind == "b" else a.device.xp.sign(a.data), a.device)


def equal(a, b):
    """True when both tensors have the same shape and values (PyTorch's torch.equal)."""
    return tuple(a.shape) == tuple(b.shape) and bool((a.data == b.data).all())


def allclose(a, b, rtol=1e-5, atol=1e-8):
    return bool(a.device.xp.allclose(a.data, b.data, rtol=rtol, atol=atol))


# --- reductions ------------------------------------------------------------------------------------
def _reduce_args(a, dim, axis, keepdim, keepdims, op):
    dim = _norm_dim(_dim(dim, axis, op), a.ndim, op)
    if keepdims is not None:
        keepdim = keepdims
    return dim, bool(keepdim)


def sum(a, dim=None, keepdim=False, *, axis=None, keepdims=None, dtype=None):
    dim, keepdim = _reduce_args(a, dim, axis, keepdim, keepdims, "sum")
    if dtype is not None:
        a = cast(a, dtype)
    elif a.data.dtype.kind in "biu":
        a = cast(a, dtypes.int64)
    return R.Sum.apply(a, dim, keepdim)


def mean(a, dim=None, keepdim=False, *, axis=None, keepdims=None, dtype=None):
    dim, keepdim = _reduce_args(a, dim, axis, keepdim, keepdims, "mean")
    if dtype is not None:
        a = cast(a, dtype)
    elif a.data.dtype.kind != "f":
        raise DTypeError(f"mean: input dtype should be floating point, got {a.dtype} "
                         f"(call .float() first, as in PyTorch)")
    return R.Mean.apply(a, dim, keepdim)


def var(a, dim=None, unbiased=None, keepdim=False, *, correction=None, axis=None, keepdims=None):
    dim, keepdim = _reduce_args(a, dim, axis, keepdim, keepdims, "var")
    if a.data.dtype.kind != "f":
        raise DTypeError(f"var/std: input dtype should be floating point, got {a.dtype} "
                         f"(call .float() first, as in PyTorch)")
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    return R.Var.apply(a, dim, keepdim, correction)


def std(a, dim=None, unbiased=None, keepdim=False, *, correction=None, axis=None, keepdims=None):
    return sqrt(var(a, dim, unbiased, keepdim, correction=correction, axis=axis, keepdims=keepdims))


MaxResult = collections.namedtuple("max", ["values", "indices"])
MinResult = collections.namedtuple("min", ["values", "indices"])


def _max_min(a, dim, keepdim, axis, keepdims, take_min, other):
    op = "min" if take_min else "max"
    if isinstance(dim, Tensor):  # torch.max(a, b) is maximum
        other, dim = dim, None
    if other is not None:
        return minimum(a, other) if take_min else maximum(a, other)
    dim, keepdim = _reduce_args(a, dim, axis, keepdim, keepdims, op)
    if a.data.size == 0:
        raise ShapeError(f"{op}: cannot reduce an empty tensor of shape {tuple(a.shape)}")
    if dim is None or isinstance(dim, tuple):
        return R.Amax.apply(a, dim, keepdim, take_min)
    values = R.MaxDim.apply(a, dim, keepdim, take_min)
    node_indices = _last_indices(a, dim, keepdim, take_min)
    return (MinResult if take_min else MaxResult)(values, node_indices)


def _last_indices(a, dim, keepdim, take_min):
    xp = a.device.xp
    idx = xp.argmin(a.data, axis=dim) if take_min else xp.argmax(a.data, axis=dim)
    if keepdim:
        idx = xp.expand_dims(idx, dim)
    return _wrap(idx.astype(np.int64, copy=False), a.device)


def max(a, dim=None, keepdim=False, *, axis=None, keepdims=None, other=None):
    """``max(a)`` → scalar; ``max(a, dim)`` → (values, indices); ``max(a, b)`` → maximum."""
    return _max_min(a, dim, keepdim, axis, keepdims, False, other)


def min(a, dim=None, keepdim=False, *, axis=None, keepdims=None, other=None):
    return _max_min(a, dim, keepdim, axis, keepdims, True, other)


def amax(a, dim=None, keepdim=False, *, axis=None, keepdims=None):
    dim, keepdim = _reduce_args(a, dim, axis, keepdim, keepdims, "amax")
    return R.Amax.apply(a, dim, keepdim, False)


def amin(a, dim=None, keepdim=False, *, axis=None, keepdims=None):
    dim, keepdim = _reduce_args(a, dim, axis, keepdim, keepdims, "amin")
    return R.Amax.apply(a, dim, keepdim, True)


def _arg_reduce(a, dim, keepdim, axis, take_min):
    op = "argmin" if take_min else "argmax"
    dim = _norm_dim(_dim(dim, axis, op), a.ndim, op)
    xp = a.device.xp
    try:
        res = (xp.argmin if take_min else xp.argmax)(a.data, axis=dim)
    except ValueError:
        raise ShapeError(f"{op}: cannot reduce an empty dim (shape {tuple(a.shape)}, dim {dim})") from None
    if dim is None:
        res = xp.asarray(res, dtype=np.int64).reshape((1,) * a.ndim if keepdim else ())
    elif keepdim:
        res = xp.expand_dims(res, dim)
    return _wrap(res.astype(np.int64, copy=False), a.device)


def argmax(a, dim=None, keepdim=False, *, axis=None):
    return _arg_reduce(a, dim, keepdim, axis, False)


def argmin(a, dim=None, keepdim=False, *, axis=None):
    return _arg_reduce(a, dim, keepdim, axis, True)


def logsumexp(a, dim=None, keepdim=False, *, axis=None, keepdims=None):
    dim, keepdim = _reduce_args(a, dim, axis, keepdim, keepdims, "logsumexp")
    if a.data.dtype.kind != "f":
        a = cast(a, dtypes.default_float)
    return R.LogSumExp.apply(a, dim, keepdim)


def prod(a, dim=None, keepdim=False, *, axis=None, keepdims=None):
    dim, keepdim = _reduce_args(a, dim, axis, keepdim, keepdims, "prod")
    if isinstance(dim, tuple):
        raise ArgumentError("prod: dim must be a single int (as in PyTorch)")
    return R.Prod.apply(a, dim, keepdim)


def cumsum(a, dim=None, *, axis=None):
    dim = _norm_dim(_dim(dim, axis, "cumsum"), a.ndim, "cumsum")
    if dim is None:
        raise ArgumentError("cumsum: dim is required")
    return R.Cumsum.apply(a, dim)


def norm(a, p=2, dim=None, keepdim=False):
    if p == 2:
        return sqrt(sum(a * a, dim, keepdim))
    if p == 1:
        return sum(abs(a), dim, keepdim)
    return pow(sum(pow(abs(a), p), dim, keepdim), 1.0 / p)


# --- linear algebra --------------------------------------------------------------------------------
def matmul(a, b):
    if not isinstance(b, Tensor):
        b = as_tensor_like(b, a)
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(f"matmul: both arguments need at least 1 dimension, got shapes "
                         f"{tuple(a.shape)} and {tuple(b.shape)}")
    k_a = a.shape[-1]
    k_b = b.shape[0] if b.ndim == 1 else b.shape[-2]
    if k_a != k_b:
        raise ShapeError(f"matmul: shapes {tuple(a.shape)} and {tuple(b.shape)} are not aligned "
                         f"({k_a} != {k_b})")
    if a.ndim > 2 or b.ndim > 2:
        try:
            np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        except ValueError:
            raise ShapeError(f"matmul: batch dims of shapes {tuple(a.shape)} and {tuple(b.shape)} do not "
                             f"broadcast ({tuple(a.shape[:-2])} vs {tuple(b.shape[:-2])})") from None
    return L.MatMul.apply(a, b)


def mm(a, b):
    if a.ndim != 2 or b.ndim != 2:
        raise ShapeError(f"mm: expected 2-D tensors, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    return matmul(a, b)


def bmm(a, b):
    if a.ndim != 3 or b.ndim != 3:
        raise ShapeError(f"bmm: expected 3-D tensors, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    return matmul(a, b)


# --- shape -----------------------------------------------------------------------------------------
def _shape_arg(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return tuple(int(s) for s in shape)


def reshape(a, *shape):
    shape = _shape_arg(shape)
    size = a.data.size
    known = 1
    for s in shape:
        if s != -1:
            known *= s
    if shape.count(-1) > 1 or (shape.count(-1) == 0 and known != size) or \
            (shape.count(-1) == 1 and (known == 0 or size % known)):
        raise ShapeError(f"reshape: shape {shape} is invalid for a tensor of shape {tuple(a.shape)} "
                         f"({size} elements)")
    if tuple(shape) == a.shape:
        return a
    return _share_version(S.Reshape.apply(a, shape), a)


def view(a, *shape):
    if len(shape) == 1 and not isinstance(shape[0], (tuple, list, int)):
        return cast(a, shape[0])  # view(dtype) is not supported as a bit-reinterpretation; document it
    return reshape(a, *shape)


def transpose(a, dim0, dim1):
    d0, d1 = _norm_dim(dim0, a.ndim, "transpose"), _norm_dim(dim1, a.ndim, "transpose")
    if a.ndim < 2 and d0 == d1:
        return a
    return _share_version(S.Transpose.apply(a, d0, d1), a)


swapaxes = transpose


def t(a):
    if a.ndim > 2:
        raise ShapeError(f"t: expects a tensor with <= 2 dimensions, got {a.ndim}")
    return a if a.ndim < 2 else transpose(a, 0, 1)


def permute(a, *dims):
    dims = _shape_arg(dims)
    if sorted(_norm_dim(d, a.ndim, "permute") for d in dims) != list(range(a.ndim)):
        raise ShapeError(f"permute: dims {dims} are not a permutation of the {a.ndim} dims of a tensor "
                         f"of shape {tuple(a.shape)}")
    dims = tuple(d % a.ndim for d in dims)
    return _share_version(S.Permute.apply(a, dims), a)


def expand(a, *sizes):
    sizes = _shape_arg(sizes)
    if len(sizes) < a.ndim:
        raise ShapeError(f"expand: the number of sizes ({len(sizes)}) must be >= the number of dims "
                         f"({a.ndim}) of a tensor of shape {tuple(a.shape)}")
    lead = len(sizes) - a.ndim
    shape = []
    for i, s in enumerate(sizes):
        if s == -1:
            if i < lead:
                raise ShapeError("expand: -1 is not allowed for new leading dims")
            s = a.shape[i - lead]
        elif i >= lead and a.shape[i - lead] not in (1, s):
            raise ShapeError(f"expand: cannot expand dim {i - lead} of size {a.shape[i - lead]} to {s} "
                             f"(shape {tuple(a.shape)} → {sizes})")
        shape.append(s)
    return _share_version(S.Expand.apply(a, tuple(shape)), a)


def expand_as(a, other):
    return expand(a, *other.shape)


def broadcast_to(a, shape):
    return expand(a, *shape)


def squeeze(a, dim=None):
    if dim is None:
        shape = tuple(s for s in a.shape if s != 1)
    else:
        dims = _norm_dim(dim if isinstance(dim, tuple) else (dim,), a.ndim, "squeeze")
        shape = tuple(s for i, s in enumerate(a.shape) if not (i in dims and s == 1))
    return reshape(a, shape)


def unsqueeze(a, dim):
    if not -a.ndim - 1 <= dim <= a.ndim:
        raise OpIndexError(f"unsqueeze: dim {dim} is out of range for a tensor with {a.ndim} dims")
    dim = dim % (a.ndim + 1)
    shape = a.shape[:dim] + (1,) + a.shape[dim:]
    return reshape(a, shape)


def flatten(a, start_dim=0, end_dim=-1):
    if a.ndim == 0:
        return reshape(a, 1)
    s = _norm_dim(start_dim, a.ndim, "flatten")
    e = _norm_dim(end_dim, a.ndim, "flatten")
    if s > e:
        raise ArgumentError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
    n = 1
    for x in a.shape[s:e + 1]:
        n *= x
    return reshape(a, a.shape[:s] + (n,) + a.shape[e + 1:])


def unflatten(a, dim, sizes):
    dim = _dim_of_nd(a, dim, "unflatten")
    return reshape(a, a.shape[:dim] + tuple(sizes) + a.shape[dim + 1:])


def _check_same(tensors, op):
    if not tensors:
        raise ArgumentError(f"{op}: expected a non-empty sequence of tensors")
    if not builtins.all(isinstance(x, Tensor) for x in tensors):
        raise ArgumentError(f"{op}: expected a sequence of Tensors")


def cat(tensors, dim=None, *, axis=None):
    tensors = list(tensors)
    _check_same(tensors, "cat")
    dim = _norm_dim(_dim(dim, axis, "cat") or 0, tensors[0].ndim, "cat")
    ref = tensors[0].shape
    for i, x in enumerate(tensors):
        if x.ndim != len(ref) or builtins.any(s != r for j, (s, r) in enumerate(zip(x.shape, ref)) if j != dim):
            raise ShapeError(f"cat: tensor {i} has shape {tuple(x.shape)}, which does not match "
                             f"{tuple(ref)} outside dim {dim}")
    if len(tensors) == 1:
        return tensors[0]
    return S.Cat.apply(*tensors, dim=dim)


concatenate = concat = cat


def stack(tensors, dim=None, *, axis=None):
    tensors = list(tensors)
    _check_same(tensors, "stack")
    dim = _dim(dim, axis, "stack") or 0
    n = tensors[0].ndim + 1
    if not -n <= dim < n:
        raise OpIndexError(f"stack: dim {dim} is out of range for {n}-dim results")
    for i, x in enumerate(tensors):
        if x.shape != tensors[0].shape:
            raise ShapeError(f"stack: expects each tensor to be equal size, but got {tuple(tensors[0].shape)}"
                             f" at entry 0 and {tuple(x.shape)} at entry {i}")
    return S.Stack.apply(*tensors, dim=dim % n)


def narrow(a, dim, start, length):
    dim = _dim_of_nd(a, dim, "narrow")
    index = (slice(None),) * dim + (slice(start, start + length),)
    return getitem(a, index)


def split(a, split_size_or_sections, dim=0):
    dim = _dim_of_nd(a, dim, "split")
    n = a.shape[dim]
    if isinstance(split_size_or_sections, int):
        if split_size_or_sections <= 0:
            raise ArgumentError(f"split: split_size must be positive, got {split_size_or_sections}")
        sizes = [split_size_or_sections] * (n // split_size_or_sections)
        if n % split_size_or_sections:
            sizes.append(n % split_size_or_sections)
    else:
        sizes = list(split_size_or_sections)
        if builtins.sum(sizes) != n:
            raise ShapeError(f"split: sections {sizes} do not add up to {n} (dim {dim} of shape "
                             f"{tuple(a.shape)})")
    out, start = [], 0
    for s in sizes:
        out.append(narrow(a, dim, start, s))
        start += s
    return tuple(out)


def chunk(a, chunks, dim=0):
    if chunks <= 0:
        raise ArgumentError(f"chunk: chunks must be positive, got {chunks}")
    dim = _dim_of_nd(a, dim, "chunk")
    size = -(-a.shape[dim] // chunks)
    return split(a, builtins.max(size, 1), dim)


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
    return S.Pad.apply(a, tuple(widths), value)


def repeat(a, *sizes):
    sizes = _shape_arg(sizes)
    if len(sizes) < a.ndim:
        raise ShapeError(f"repeat: number of repeat dims ({len(sizes)}) can not be smaller than the "
                         f"number of tensor dims ({a.ndim})")
    return S.Repeat.apply(a, sizes)


def tril(a, diagonal=0):
    if a.ndim < 2:
        raise ShapeError(f"tril: input must have at least 2 dims, got shape {tuple(a.shape)}")
    return S.Tril.apply(a, diagonal, False)


def triu(a, diagonal=0):
    if a.ndim < 2:
        raise ShapeError(f"triu: input must have at least 2 dims, got shape {tuple(a.shape)}")
    return S.Tril.apply(a, diagonal, True)


def flip(a, dims):
    dims = _norm_dim(tuple(dims) if isinstance(dims, (list, tuple)) else (dims,), a.ndim, "flip")
    return S.Flip.apply(a, dims)


def masked_fill(a, mask, value):
    mask = mask if isinstance(mask, Tensor) else as_tensor_like(mask, a)
    if mask.data.dtype.kind != "b":
        raise DTypeError(f"masked_fill: mask must be a bool tensor, got {mask.dtype}")
    if isinstance(value, Tensor):
        if value.numel() != 1:
            raise ShapeError("masked_fill: value must be a number or a 0-dim tensor")
        value = value.item()
    try:
        np.broadcast_shapes(tuple(mask.shape), tuple(a.shape))
    except ValueError:
        raise ShapeError(f"masked_fill: mask of shape {tuple(mask.shape)} does not broadcast to the "
                         f"tensor's shape {tuple(a.shape)}") from None
    return S.MaskedFill.apply(a, mask, value)


def gather(a, dim, index):
    dim = _dim_of_nd(a, dim, "gather")
    if not isinstance(index, Tensor) or index.data.dtype.kind not in "iu":
        raise DTypeError(f"gather: index must be an integer tensor, got "
                         f"{index.dtype if isinstance(index, Tensor) else type(index).__name__}")
    if index.ndim != a.ndim:
        raise ShapeError(f"gather: index has {index.ndim} dims but input has {a.ndim} "
                         f"(shapes {tuple(index.shape)}, {tuple(a.shape)})")
    for d in range(a.ndim):
        if d != dim and index.shape[d] > a.shape[d]:
            raise ShapeError(f"gather: index shape {tuple(index.shape)} is larger than input shape "
                             f"{tuple(a.shape)} in dim {d}")
    if index.numel() and (int(index.data.min()) < -a.shape[dim] or int(index.data.max()) >= a.shape[dim]):
        raise OpIndexError(f"gather: index out of range [{int(index.data.min())}, {int(index.data.max())}] "
                           f"for dim {dim} of size {a.shape[dim]}")
    return I.Gather.apply(a, dim, index)


def one_hot(t, num_classes=-1):
    if t.data.dtype.kind not in "iu":
        raise DTypeError(f"one_hot: expects an integer tensor of class indices, got {t.dtype}")
    xp = t.device.xp
    if num_classes < 0:
        num_classes = int(t.data.max()) + 1 if t.numel() else 0
    if t.numel() and (int(t.data.min()) < 0 or int(t.data.max()) >= num_classes):
        raise OpIndexError(f"one_hot: class values must be in [0, {num_classes}), got "
                           f"[{int(t.data.min())}, {int(t.data.max())}]")
    out = (t.data[..., None] == xp.arange(num_classes)).astype(np.int64)
    return _wrap(out, t.device)


# --- indexing --------------------------------------------------------------------------------------
def _convert_index(index, ref):
    items = index if isinstance(index, tuple) else (index,)
    out = []
    for i in items:
        if isinstance(i, Tensor):
            if i.data.dtype.kind not in "iub":
                raise DTypeError(f"index: tensors used as indices must be integer or bool, got {i.dtype}")
            if i.device != ref.device:
                raise DeviceError(f"index: index on {i.device} for a tensor on {ref.device}")
            out.append(i.data)
        elif isinstance(i, (list, np.ndarray)):
            arr = np.asarray(i)
            if arr.dtype.kind not in "iub" and arr.size:
                raise DTypeError(f"index: arrays used as indices must be integer or bool, got {arr.dtype}")
            out.append(ref.device.backend.asarray(arr.astype(np.int64) if arr.dtype.kind == "f" or
                                                  (arr.size == 0 and arr.dtype.kind != "b") else arr))
        elif isinstance(i, float):
            raise DTypeError(f"index: float index {i} (only integers, slices, None, Ellipsis, bool and "
                             f"integer tensors are valid)")
        else:
            out.append(i)
    return tuple(out) if isinstance(index, tuple) else out[0]


def getitem(a, index):
    index = _convert_index(index, a)
    out = I.GetItem.apply(a, index)
    if I.is_basic(index):
        _share_version(out, a)
    return out


def _check_inplace(t, op):
    if t.requires_grad and t.grad_fn is None and _grad.enabled:
        raise AutogradError(f"{op}: a leaf tensor that requires grad is used in an in-place operation "
                            f"(do it under mg.no_grad(), or work on a clone)")


def _bump(t):
    t._vc[0] += 1
    return t


def _write(t, index, values, op):
    """``t.data[index] = values``, then bump the version; NumPy's complaints become minigrad errors."""
    if not getattr(t.data.flags, "writeable", True):
        raise ShapeError(f"{op}: the tensor of shape {tuple(t.shape)} is a broadcast view (expand) whose "
                         f"elements share memory; clone() it before writing in place")
    try:
        t.data[index] = values
    except IndexError as e:
        raise OpIndexError(f"{op}: {e} (tensor shape {tuple(t.shape)})") from None
    except (ValueError, TypeError) as e:
        raise ShapeError(f"{op}: {e} (tensor shape {tuple(t.shape)})") from None
    return _bump(t)


def _rebase(t, result, op):
    """Make the in-place op's result ``t``'s new value and history."""
    if getattr(t, "_is_view", False):
        raise AutogradError(f"{op}: in-place autograd on a view is not supported by minigrad; "
                            f"use an out-of-place op")
    if result.shape != t.shape:
        raise ShapeError(f"{op}: output of shape {tuple(result.shape)} can't be written into a tensor of "
                         f"shape {tuple(t.shape)}")
    if result.data.dtype != t.data.dtype:
        result = cast(result, t.dtype)
    _write(t, ..., result.data, op)
    t.grad_fn = result.grad_fn
    t.requires_grad = result.requires_grad
    return t


def _snapshot(t):
    """A private copy of ``t`` that keeps its history. A recorded in-place op computes from (and may save
    for its backward) this copy, so writing the result into ``t``'s storage can't corrupt what it saved."""
    s = Tensor._make(t.data.copy(), t.device, t.requires_grad)
    s.grad_fn = t.grad_fn
    return s


def inplace(t, fn, *args):
    """Run ``fn(t, *args)`` and write the result into ``t`` (``add_``, ``mul_``, ``clamp_``...)."""
    op = fn.__name__ + "_"
    _check_inplace(t, op)
    tracking = _grad.enabled and (t.requires_grad or builtins.any(
        isinstance(x, Tensor) and x.requires_grad for x in args))
    if tracking:
        snap = _snapshot(t)
        return _rebase(t, fn(snap, *(snap if a is t else a for a in args)), op)
    ufunc = _INPLACE_UFUNCS.get(fn.__name__)
    if ufunc is not None and len(args) == 1:  # add_/sub_/mul_/div_: truly in place, no temporary
        return _ufunc_inplace(t, ufunc, args[0], op)
    with grad_mode.no_grad():
        result = fn(t, *args)
    if result.shape != t.shape:
        raise ShapeError(f"{op}: output of shape {tuple(result.shape)} can't be written into a tensor of "
                         f"shape {tuple(t.shape)}")
    if not np.can_cast(result.data.dtype, t.data.dtype, "same_kind"):
        raise DTypeError(f"{op}: result type {result.dtype} can't be cast to the tensor's dtype {t.dtype}")
    return _write(t, ..., result.data, op)


_INPLACE_UFUNCS = {"add": "add", "sub": "subtract", "mul": "multiply", "div": "divide"}


def _ufunc_inplace(t, ufunc, other, op):
    """``t op= other`` with the ufunc's ``out=`` (as PyTorch's in-place ops: no full-size temporary)."""
    if isinstance(other, Tensor):
        if other.device != t.device:
            raise DeviceError(f"{op}: tensors on different devices ({t.device}, {other.device})")
        other = other.data
    elif not isinstance(other, _NUMBER):
        other = _operand(other, t)
        other = other.data if isinstance(other, Tensor) else other
    if not getattr(t.data.flags, "writeable", True):
        raise ShapeError(f"{op}: the tensor of shape {tuple(t.shape)} is a broadcast view (expand) whose "
                         f"elements share memory; clone() it before writing in place")
    try:
        getattr(t.device.xp, ufunc)(t.data, other, out=t.data, casting="same_kind")
    except TypeError:
        if isinstance(other, float) or (ufunc == "divide" and t.data.dtype.kind in "biu"):
            result = dtypes.default_float.name   # int tensor and a Python float: float32, as in PyTorch
        else:
            result = np.result_type(t.data.dtype, other).name
        raise DTypeError(f"{op}: result type {result} can't be cast to the tensor's dtype "
                         f"{t.dtype.name}") from None
    except ValueError:
        raise ShapeError(f"{op}: output of shape {tuple(np.broadcast_shapes(t.shape, np.shape(other)))} "
                         f"can't be written into a tensor of shape {tuple(t.shape)}") from None
    return _bump(t)


def setitem_(t, index, value):
    _check_inplace(t, "setitem")
    idx = _convert_index(index, t)
    if isinstance(value, Tensor) and value.device != t.device:
        raise DeviceError(f"setitem: value on {value.device} for a tensor on {t.device}")
    if _grad.enabled and (t.requires_grad or (isinstance(value, Tensor) and value.requires_grad)):
        v = value if isinstance(value, Tensor) else _operand(value, t)
        if isinstance(v, Tensor) and v.data.dtype != t.data.dtype:
            v = cast(v, t.dtype)  # the gradient is cast back to the value's dtype
        return _rebase(t, I.SetItem.apply(t, idx, v), "setitem")
    return _write(t, idx, value.data if isinstance(value, Tensor) else value, "setitem")


def fill_(t, value):
    _check_inplace(t, "fill_")
    return _write(t, ..., value.item() if isinstance(value, Tensor) else value, "fill_")


def copy_(t, src):
    _check_inplace(t, "copy_")
    if not isinstance(src, Tensor):
        src = as_tensor_like(src, t)
    if _grad.enabled and src.requires_grad:
        moved = cast(src if src.device == t.device else to_device(src, t.device), t.dtype)
        return _rebase(t, expand(moved, *t.shape) + 0 if moved.shape != t.shape else clone(moved), "copy_")
    data = src.data if src.device == t.device else get_backend(t.device).asarray(
        get_backend(src.device).to_host(src.data))
    return _write(t, ..., data, "copy_")


def random_fill_(t, kind, a, b, generator):
    from ..random import host_rng
    _check_inplace(t, kind + "_")
    rng = host_rng(generator)
    host = rng.uniform(a, b, t.shape) if kind == "uniform" else rng.normal(a, b, t.shape)
    return _write(t, ..., t.device.backend.asarray(host.astype(t.data.dtype)), kind + "_")


def all(a, dim=None, keepdim=False):
    return _wrap(a.device.xp.all(a.data, axis=_norm_dim(dim, a.ndim, "all"), keepdims=keepdim), a.device)


def any(a, dim=None, keepdim=False):
    return _wrap(a.device.xp.any(a.data, axis=_norm_dim(dim, a.ndim, "any"), keepdims=keepdim), a.device)
