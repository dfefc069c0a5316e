"""How the pool sees ops: each allocation is labelled with the op that made it.

This plugs into the core's extension points (``minigrad/autograd/extensions.py``) while a pool is on
anywhere: a forward wrapper around every ``Function.apply`` and a backward wrapper around every node's
backward, registered *process-wide* (``process_wide=True``): the pool serves every thread, so every
thread's ops are labelled, each in its own thread (``current_op`` is per thread). Each looks at the op's
device and does nothing when that device has no pool. What an op returns or saves for backward reaches
pool storage through the backend's storage hook (``ArrayBackend.empty``/``adopt``, which ``Function.apply``
calls), not through these wrappers.
"""
from ..autograd import extensions
from ..backend.device import get_backend

NAME = "memory.op_labels"


def label_forward(op, args, kwargs, run):
    dev = extensions.device_of(args)
    storage = None if dev is None else (dev.backend or get_backend(dev)).allocator
    if storage is None:
        return run()
    previous, storage.current_op = storage.current_op, op.name
    try:
        return run()
    finally:
        storage.current_op = previous


def label_backward(node, grad, run):
    storage = node.device.backend.allocator
    if storage is None:
        return run()
    previous, storage.current_op = storage.current_op, node.name + ".backward"
    try:
        return run()
    finally:
        storage.current_op = previous


def install():
    """Called by ``minigrad.memory.enable``: label from now on, in every thread (idempotent)."""
    if NAME not in extensions.forward_wrappers.names():
        extensions.forward_wrappers.add(label_forward, NAME, process_wide=True)
        extensions.backward_wrappers.add(label_backward, NAME, process_wide=True)


def uninstall():
    """Called when no device has a pool any more."""
    extensions.forward_wrappers.remove(NAME)
    extensions.backward_wrappers.remove(NAME)
