"""Run a generated NumPy kernel over its output in cache-sized blocks.

Eager NumPy evaluates ``y = x * 0.5 * (1 + tanh(...))`` one op at a time: each op reads and writes a whole
array, so a chain of k ops moves about 3k full arrays through memory and holds several full-size
temporaries. The fused kernel instead walks the output block by block (``BLOCK`` elements, a few hundred KB:
they stay in the CPU cache) and runs the whole chain on each block into small reusable buffers. Memory
traffic falls to reading the inputs and writing the output once; the temporaries are a few blocks.

Blocks follow the output's C order: the trailing axes whose sizes multiply to at most ``block`` are taken
whole, the axis before them is cut into chunks, and the leading axes are looped over. Inputs that broadcast
(size-1 or missing axes) are indexed accordingly, so a bias of shape (C,) is read in place, never expanded.
"""
import numpy as np

BLOCK = 32768   # elements per block: 128 KB of float32 per buffer


def plan(shape, block):
    """``(axis, chunk)``: blocks are ``out[i0, .., i_{axis-1}, lo:lo+chunk]``; axis -1: one block."""
    inner, axis = 1, len(shape)
    while axis > 0 and inner * shape[axis - 1] <= block:
        inner *= shape[axis - 1]
        axis -= 1
    if axis == 0:
        return -1, 0
    return axis - 1, max(1, block // inner)


def blocks(shape, block):
    """Index tuples (ints for looped axes, then a slice) covering ``shape`` in C order."""
    axis, chunk = plan(shape, block)
    if axis < 0:
        yield ()
        return
    for outer in np.ndindex(*shape[:axis]):
        for lo in range(0, shape[axis], chunk):
            yield outer + (slice(lo, min(lo + chunk, shape[axis])),)


def block_shape(shape, block):
    """The largest block's shape (buffers are allocated once at this size)."""
    axis, chunk = plan(shape, block)
    if axis < 0:
        return tuple(shape)
    return (min(chunk, shape[axis]),) + tuple(shape[axis + 1:])


def view(x, index, ndim):
    """The part of input ``x`` (broadcasting to an ``ndim``-d output) that block ``index`` reads.

    Both the output block and this view drop the looped (integer-indexed) leading axes, so what is left
    stays right-aligned and broadcasts as the whole arrays did."""
    if not index or not isinstance(x, np.ndarray) or x.ndim == 0:
        return x
    off, idx = ndim - x.ndim, []
    for d, size in enumerate(x.shape):
        if d + off >= len(index):
            break
        e = index[d + off]
        idx.append(e if size != 1 else (0 if isinstance(e, int) else slice(None)))
    return x[tuple(idx)] if idx else x


def run_forward(body, inputs, out, buffer_dtypes, block=BLOCK):
    """``body(*input_views, out_view, buffers)`` for each block of ``out``; buffers are reused."""
    shape = out.shape
    bshape = block_shape(shape, block)
    bufs = [np.empty(bshape, dt) for dt in buffer_dtypes]
    for index in blocks(shape, block):
        o = out[index] if index else out
        n = o.shape[0] if o.ndim else 0
        t = [b[:n] if len(b.shape) and b.shape[0] != n else b for b in bufs] if index else bufs
        body(*[view(x, index, len(shape)) for x in inputs], o, t)
    return out


def run_backward(body, inputs, grad, wanted, dtypes, block=BLOCK, alloc=np.empty):
    """Full-size gradients for the ``wanted`` inputs: ``body`` returns each block's gradients."""
    shape = grad.shape
    grads = [alloc(shape, dt) if w else None for w, dt in zip(wanted, dtypes)]
    for index in blocks(shape, block):
        parts = body(*[view(x, index, len(shape)) for x in inputs], grad[index] if index else grad)
        for g, p in zip(grads, parts):
            if g is not None:
                np.copyto(g[index] if index else g, p)
    return grads
