"""Device transfer: ``to_device`` copies a tensor to another device, and its gradient is copied back.

A module of its own because this is the one op whose output lives on another device than its input:
every other Function computes on its inputs' device, while ``ToDevice.forward`` sets ``ctx.device = dst``
so that ``Function.apply`` wraps the result there (its graph node then belongs to ``dst``, where its
gradient arrives). Copies go through the host, so any two backends can exchange tensors.
"""
import numpy as np

from ..autograd.function import Function
from ..backend import dtypes
from ..backend.device import CPU, ToShortcuts, device as _device, get_backend
from ..errors import ArgumentError
from ..tensor_base import TensorBase, tensor
from ._rules import linear
from .elementwise import cast, clone


def move_array(array, src, dst):
    """``array`` (on device ``src``) copied to device ``dst``."""
    return get_backend(dst).asarray(get_backend(src).to_host(array))


class ToDevice(Function):
    """Move to another device; the gradient moves back."""
    name = "to"
    exact_dtype = True

    @staticmethod
    def forward(ctx, a, *, dst):
        ctx.src = ctx.device
        ctx.device = dst
        return get_backend(dst).adopt(move_array(a, ctx.src, dst))  # born in dst's storage (its pool)

    @staticmethod
    def backward(ctx, grad):
        return move_array(grad, ctx.device, ctx.src)

    @staticmethod
    def vjp(ctx, grad):
        return ToDevice.apply(grad, dst=ctx.src)

    jvp = linear


def to_device(a, dev):
    """``a`` copied to ``dev``; differentiable (the gradient is copied back)."""
    dev = _device(dev)
    get_backend(dev)  # raises a clear error here if the device is unavailable
    return ToDevice.apply(a, dst=dev)


class TransferMethods(ToShortcuts):
    """Tensor's ``to`` (device and dtype) and its shortcuts (``cuda()``, ``half()``...): a mixin of ``Tensor``."""
    __slots__ = ()

    def to(self, *args, **kwargs):
        """``to(dtype)``, ``to(device)``, ``to(device, dtype)``, ``to(other_tensor)``; differentiable."""
        dtype = kwargs.pop("dtype", None)
        dev = kwargs.pop("device", None)
        kwargs.pop("non_blocking", None)
        copy = kwargs.pop("copy", False)
        if kwargs:
            raise TypeError(f"to(): unexpected arguments {sorted(kwargs)}")
        for a in args:
            if isinstance(a, TensorBase):
                dtype, dev = a.dtype, a.device
            elif isinstance(a, (str, type(CPU))) and not (isinstance(a, str) and a in dtypes._BY_NAME):
                dev = a
            else:
                dtype = a
        out = self
        if dev is not None:
            dev = _device(dev)
            if dev != out.device:
                out = to_device(out, dev)
        if dtype is not None:
            dt = dtypes.to_dtype(dtype)
            if dt.np_dtype != out.array.dtype:
                out = cast(out, dt)
        if copy and out is self:
            out = clone(self)
        return out

    def type(self, dtype=None):
        return self.dtype if dtype is None else self.to(dtype)

    def long(self):
        return self.to(dtypes.int64)

    def int(self):
        return self.to(dtypes.int32)

    def bool(self):
        return self.to(dtypes.bool_)

    def type_as(self, other):
        return self.to(other.dtype)

    # --- new tensors with this one's dtype and device (``w.new_zeros(n, h)``), unless told otherwise ------
    def new_empty(self, *size, dtype=None, device=None, requires_grad=False):
        return self.new_full(_size_arg(size), 0, dtype=dtype, device=device, requires_grad=requires_grad)

    def new_zeros(self, *size, dtype=None, device=None, requires_grad=False):
        return self.new_full(_size_arg(size), 0, dtype=dtype, device=device, requires_grad=requires_grad)

    def new_ones(self, *size, dtype=None, device=None, requires_grad=False):
        return self.new_full(_size_arg(size), 1, dtype=dtype, device=device, requires_grad=requires_grad)

    def new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False):
        if any(int(n) < 0 for n in size):
            raise ArgumentError(f"new_full: negative dimension in size {tuple(size)}")
        return self.new_tensor(np.full(tuple(size), fill_value), dtype, device, requires_grad)

    def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
        """A copy of ``data`` with this tensor's dtype and device (PyTorch's rule: not ``data``'s dtype)."""
        return tensor(data, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad)


def _size_arg(size):
    """``(2, 3)`` from ``f(2, 3)`` or ``f((2, 3))``."""
    return tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
