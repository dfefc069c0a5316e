"""Parameter/buffer construction shared by the layers: ``device=`` and ``dtype=`` keyword arguments."""
from ...creation import empty, ones, zeros
from ..parameter import Parameter


def new_param(*shape, device=None, dtype=None):
    """An uninitialised Parameter (the layer's reset_parameters fills it)."""
    return Parameter(empty(*shape, device=device, dtype=dtype))


def zeros_buffer(*shape, device=None, dtype=None):
    return zeros(*shape, device=device, dtype=dtype)


def ones_buffer(*shape, device=None, dtype=None):
    return ones(*shape, device=device, dtype=dtype)
