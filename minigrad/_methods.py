"""Tensor's operators and methods that are ops: ``x + y``, ``x[i]``, ``x.sum(dim=1)``, ``x.add_(y)``, ``x.to()``.

Each is a function of ``minigrad.ops`` (core) bound onto ``Tensor`` here, after both exist: the ops
import Tensor to build results, so ``tensor.py`` cannot import them (that would be an import cycle).
``x + y`` therefore calls ``ops.add(x, y)`` directly, one call and no wrapper. Nothing here comes from the
``nn`` feature layer.
"""
from . import ops
from .backend import dtypes
from .backend.device import CPU, device as _device
from .ops.nn import activation
from .tensor import Tensor

# --- operators: ``a <op> b`` is ``ops.<fn>(a, b)`` ---------------------------------------------------------
_OPERATORS = {
    "__add__": ops.add, "__radd__": ops.add, "__sub__": ops.sub, "__rsub__": ops.rsub,
    "__mul__": ops.mul, "__rmul__": ops.mul, "__truediv__": ops.div, "__rtruediv__": ops.rdiv,
    "__pow__": ops.pow, "__rpow__": ops.rpow, "__matmul__": ops.matmul, "__neg__": ops.neg,
    "__abs__": ops.abs, "__floordiv__": ops.floor_divide, "__mod__": ops.remainder,
    "__lt__": ops.lt, "__le__": ops.le, "__gt__": ops.gt, "__ge__": ops.ge, "__eq__": ops.eq, "__ne__": ops.ne,
    "__invert__": ops.logical_not, "__and__": ops.logical_and, "__or__": ops.logical_or,
    "__xor__": ops.logical_xor, "__getitem__": ops.getitem, "__setitem__": ops.setitem_,
}
for _name, _fn in _OPERATORS.items():
    setattr(Tensor, _name, _fn)
Tensor.__pos__ = lambda self: self
Tensor.__rmatmul__ = lambda self, other: ops.matmul(ops.as_tensor_like(other, self), self)

# --- methods with the same name as the function ---------------------------------------------------------
_SAME_NAME = """add sub mul div neg pow exp log sqrt abs sin cos square rsqrt clamp clip maximum minimum sum mean
var std max min amax amin argmax argmin logsumexp prod cumsum norm matmul mm bmm reshape view transpose
swapaxes permute expand expand_as broadcast_to squeeze unsqueeze flatten unflatten split chunk narrow repeat
tril triu flip masked_fill gather isnan isinf isfinite sign all any logical_not logical_and logical_or
eq ne lt le gt ge clone copy_ fill_""".split()
for _name in _SAME_NAME:
    setattr(Tensor, _name, getattr(ops, _name))
for _name in ("relu", "sigmoid", "tanh", "softmax", "log_softmax", "gelu", "silu"):
    setattr(Tensor, _name, getattr(activation, _name))

Tensor.divide = Tensor.true_divide = ops.div
Tensor.negative = ops.neg
Tensor.t = ops.t
Tensor.T = property(lambda self: ops.permute(self, *reversed(range(self.ndim))) if self.ndim > 1 else self)
Tensor.mT = property(lambda self: ops.transpose(self, -2, -1))
Tensor.where = lambda self, condition, other: ops.where(condition, self, other)


# --- in-place methods: bump the version counter; refuse leaves that require grad (ops/inplace.py) ---------
def add_(self, other, alpha=1):
    return ops.inplace(self, ops.add, other if alpha == 1 else other * alpha)


def sub_(self, other, alpha=1):
    return ops.inplace(self, ops.sub, other if alpha == 1 else other * alpha)


def clamp_(self, min=None, max=None):
    return ops.inplace(self, ops.clamp, min, max)


def _inplace_of(fn):
    def method(self, other):
        return ops.inplace(self, fn, other)
    method.__name__ = fn.__name__ + "_"
    return method


Tensor.add_, Tensor.sub_, Tensor.clamp_, Tensor.clip_ = add_, sub_, clamp_, clamp_
Tensor.mul_, Tensor.div_, Tensor.pow_ = _inplace_of(ops.mul), _inplace_of(ops.div), _inplace_of(ops.pow)
Tensor.masked_fill_ = lambda self, mask, value: ops.inplace(self, ops.masked_fill, mask, value)
Tensor.zero_ = lambda self: ops.fill_(self, 0)
Tensor.uniform_ = lambda self, a=0.0, b=1.0, generator=None: ops.random_fill_(self, "uniform", a, b, generator)
Tensor.normal_ = lambda self, mean=0.0, std=1.0, generator=None: ops.random_fill_(self, "normal", mean, std,
                                                                                 generator)
Tensor.__iadd__ = lambda self, other: self.add_(other)
Tensor.__isub__ = lambda self, other: self.sub_(other)
Tensor.__imul__ = lambda self, other: self.mul_(other)
Tensor.__itruediv__ = lambda self, other: self.div_(other)


# --- copies, dtype and device ---------------------------------------------------------------------------
def contiguous(self):
    """C-order (row-major) memory: ``self`` if it is already, else a differentiable copy."""
    return self if self.data.flags.c_contiguous else ops.clone(self)


def stride(self, dim=None):
    """Strides in elements (PyTorch's convention; NumPy's ``.data.strides`` are in bytes)."""
    strides = tuple(s // self.data.itemsize for s in self.data.strides)
    return strides if dim is None else strides[ops._norm_dim(dim, self.ndim, "stride")]


def to(self, *args, **kwargs):
    """``to(dtype)``, ``to(device)``, ``to(device, dtype)``, ``to(other_tensor)``; differentiable."""
    dtype = kwargs.pop("dtype", None)
    dev = kwargs.pop("device", None)
    kwargs.pop("non_blocking", None)
    copy = kwargs.pop("copy", False)
    if kwargs:
        raise TypeError(f"to(): unexpected arguments {sorted(kwargs)}")
    for a in args:
        if isinstance(a, Tensor):
            dtype, dev = a.dtype, a.device
        elif isinstance(a, (str, type(CPU))) and not (isinstance(a, str) and a in dtypes._BY_NAME):
            dev = a
        else:
            dtype = a
    out = self
    if dev is not None:
        dev = _device(dev)
        if dev != out.device:
            out = ops.to_device(out, dev)
    if dtype is not None:
        dt = dtypes.to_dtype(dtype)
        if dt.np_dtype != out.data.dtype:
            out = ops.cast(out, dt)
    if copy and out is self:
        out = ops.clone(self)
    return out


Tensor.contiguous, Tensor.stride, Tensor.to = contiguous, stride, to
