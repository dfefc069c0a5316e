"""How the pool sees ops: each allocation is labelled with the op that made it, and what an op returns
or saves for backward lives in pool blocks, so statistics count every tensor and every activation.

This plugs into the core's extension points (``minigrad/autograd/extensions.py``) while a pool is on
anywhere: a forward wrapper around every ``Function.apply`` and a backward wrapper around every node's
backward. Each looks at the op's device and does nothing when that device has no pool. Ops that write
into ``ctx.empty(...)`` already get pool storage through the backend hook; the rest is adopted here.
"""
from ..autograd import extensions
from ..tensor import Tensor


def _device_of(args):
    for a in args:
        if isinstance(a, Tensor):
            return a.device
    return None


def label_forward(op, args, kwargs, run):
    dev = _device_of(args)
    alloc = None if dev is None or dev.backend is None else dev.backend.allocator
    if alloc is None:
        return _into_pool(run())
    previous, alloc.current_op = alloc.current_op, op.name
    try:
        return _into_pool(run())
    finally:
        alloc.current_op = previous


def label_backward(node, grad, run):
    alloc = node.device.backend.allocator
    if alloc is None:
        return run()
    previous, alloc.current_op = alloc.current_op, node.name + ".backward"
    try:
        return run()
    finally:
        alloc.current_op = previous


def _into_pool(result):
    """The result (and what its backward will read) must live in pool blocks of the result's device."""
    alloc = result.device.backend.allocator
    if alloc is None:
        return result
    out = result.data
    pooled = alloc.adopt(out)
    ctx = result.grad_fn
    saved = ctx is not None and ctx._saved
    if pooled is not out:
        result.data = pooled
        if saved:  # an op that saved its output keeps the pooled copy (one array; versions still checked)
            ctx._saved = tuple(pooled if s is out else s for s in ctx._saved)
    if saved and ctx._unpack is None:
        # intermediates saved for backward are activation memory too: keep them in the pool
        array_type = type(pooled)
        ctx._saved = tuple(alloc.adopt(a) if type(a) is array_type else a for a in ctx._saved)
    return result


def install():
    """Called by ``minigrad.memory.enable``: label and adopt from now on (idempotent)."""
    if label_forward not in extensions.forward_wrappers.callbacks:
        extensions.forward_wrappers.add(label_forward)
        extensions.backward_wrappers.add(label_backward)


def uninstall():
    """Called when no device has a pool any more."""
    extensions.forward_wrappers.remove(label_forward)
    extensions.backward_wrappers.remove(label_backward)
