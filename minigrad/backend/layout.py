"""Memory layout of an array's axes: lets an op give its result the layout of its input.

minigrad's convolutions return channels-last memory (N, H, W, C) viewed as an (N, C, H, W) array, the way
PyTorch's ``channels_last`` memory format does: their GEMM naturally produces that order, and turning it
into NCHW would cost a full transposing copy per layer. Ops that allocate their own outputs (ReLU,
pooling, col2im) follow the input's layout so every elementwise pass streams memory in order.
"""


def memory_order(a):
    """The axes of ``a`` from outermost to innermost in memory, or None for plain C order."""
    if a.flags.c_contiguous:
        return None
    strides = a.strides
    order = sorted(range(a.ndim), key=lambda i: -abs(strides[i]))   # stable: ties keep C order
    return None if order == list(range(a.ndim)) else tuple(order)


def is_channels_last(a):
    """True when axis 1 (channels) of an (N, C, *spatial) array is innermost in memory."""
    order = memory_order(a) if a.ndim > 2 and a.shape[1] > 1 else None
    return order is not None and order[-1] == 1


def empty_in_order(empty, shape, dtype, order):
    """``empty(shape)`` laid out in memory in ``order`` (from memory_order): allocate the permuted shape
    contiguously and return the transposed view."""
    if order is None:
        return empty(shape, dtype)
    inverse = [0] * len(order)
    for pos, axis in enumerate(order):
        inverse[axis] = pos
    return empty(tuple(shape[i] for i in order), dtype).transpose(inverse)


def in_order(a, order, empty):
    """``a`` itself when it is laid out in ``order`` already, else a copy that is: one pass up front is
    far cheaper than every later pass mixing two layouts."""
    if memory_order(a) == order:
        return a
    out = empty_in_order(empty, a.shape, a.dtype, order)
    out[...] = a
    return out
