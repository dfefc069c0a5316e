"""Device transfer: ``to_device`` copies a tensor to another device, and its gradient is copied back.

A module of its own because this is the one op whose output lives on another device than its input:
every other Function computes on its inputs' device, while ``ToDevice.forward`` sets ``ctx.device = dst``
so that ``Function.apply`` wraps the result there (its graph node then belongs to ``dst``, where its
gradient arrives). Copies go through the host, so any two backends can exchange tensors.
"""
from ..autograd.function import Function
from ..backend.device import device as _device, get_backend


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


def to_device(a, dev):
    """``a`` copied to ``dev``; differentiable (the gradient is copied back)."""
    dev = _device(dev)
    get_backend(dev)  # raises a clear error here if the device is unavailable
    return ToDevice.apply(a, dst=dev)
