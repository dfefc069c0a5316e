"""The collectives, with PyTorch's signatures: argument checks here, the moving of bytes in the backend.

Every collective works in place on its tensors' storage and runs nonblocking underneath: with
``async_op=True`` it returns a ``Work`` at once (``wait()`` completes it), otherwise it waits before
returning. Only the default group exists (``group=None``); sub-groups (``new_group``) are not offered.
"""
import numpy as np

from ..errors import ArgumentError, DeviceError
from ..tensor import Tensor
from .process_group import ReduceOp, _group

__all__ = ["all_reduce", "broadcast", "all_gather", "reduce_scatter", "send", "recv", "isend", "irecv",
           "barrier"]


def _world(name, group):
    if group is not None and group is not _group():
        raise ArgumentError(f"{name}: only the default process group is supported (group=None)")
    return _group()


def _check_tensor(name, t, what="tensor"):
    if not isinstance(t, Tensor):
        raise ArgumentError(f"{name}: {what} must be a minigrad Tensor, got {type(t).__name__}")
    want = getattr(_group().backend, "device_type", None)
    if want is not None and t.device.type != want:
        raise DeviceError(f"{name}: backend {_group().backend_name!r} needs {want} tensors, got one on "
                          f"{t.device} (move it with .to('{want}'), or use backend 'mpi' for CPU tensors)")
    return t.data


def _check_op(name, op, dtype):
    if not isinstance(op, ReduceOp):
        raise ArgumentError(f"{name}: op must be a ReduceOp (SUM, AVG, PRODUCT, MIN, MAX), got {op!r}")
    if op is ReduceOp.AVG and np.dtype(dtype).kind != "f":
        raise ArgumentError(f"{name}: ReduceOp.AVG needs a floating-point tensor, got {np.dtype(dtype)}")


def _check_rank(name, g, r, what):
    if not isinstance(r, (int, np.integer)) or not 0 <= r < g.size:
        raise ArgumentError(f"{name}: {what}={r!r} is not a rank of this world of size {g.size}")
    return int(r)


def _finish(g, name, work, nbytes, async_op):
    g.count(name, nbytes)
    if async_op:
        return work
    work.wait()
    return None


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Combine ``tensor`` over all ranks with ``op``; every rank ends with the result (in place)."""
    g = _world("all_reduce", group)
    a = _check_tensor("all_reduce", tensor)
    _check_op("all_reduce", op, a.dtype)
    return _finish(g, "all_reduce", g.backend.all_reduce(a, op), a.nbytes, async_op)


def broadcast(tensor, src, group=None, async_op=False):
    """Copy rank ``src``'s ``tensor`` into every other rank's ``tensor``."""
    g = _world("broadcast", group)
    a = _check_tensor("broadcast", tensor)
    src = _check_rank("broadcast", g, src, "src")
    return _finish(g, "broadcast", g.backend.broadcast(a, src), a.nbytes, async_op)


def _check_list(name, g, tensors, like, what):
    if not isinstance(tensors, (list, tuple)) or len(tensors) != g.size:
        raise ArgumentError(f"{name}: {what} must be a list of {g.size} tensors (one per rank), got "
                            f"{len(tensors) if isinstance(tensors, (list, tuple)) else type(tensors).__name__}")
    arrays = [_check_tensor(name, t, what + " entries") for t in tensors]
    for i, a in enumerate(arrays):
        if a.shape != like.shape or a.dtype != like.dtype:
            raise ArgumentError(f"{name}: {what}[{i}] has shape {tuple(a.shape)} ({a.dtype}), expected "
                                f"{tuple(like.shape)} ({like.dtype}) like the tensor")
    return arrays


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """``tensor_list[r]`` receives rank r's ``tensor``, on every rank."""
    g = _world("all_gather", group)
    a = _check_tensor("all_gather", tensor)
    outs = _check_list("all_gather", g, tensor_list, a, "tensor_list")
    return _finish(g, "all_gather", g.backend.all_gather(outs, a), a.nbytes, async_op)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """``output`` on rank r receives ``op`` over all ranks of their ``input_list[r]``."""
    g = _world("reduce_scatter", group)
    out = _check_tensor("reduce_scatter", output, "output")
    ins = _check_list("reduce_scatter", g, input_list, out, "input_list")
    _check_op("reduce_scatter", op, out.dtype)
    nbytes = out.nbytes * g.size
    return _finish(g, "reduce_scatter", g.backend.reduce_scatter(out, ins, op), nbytes, async_op)


def isend(tensor, dst, group=None, tag=0):
    """Send ``tensor`` to rank ``dst``; returns a Work (the buffer must stay untouched until it is done)."""
    g = _world("isend", group)
    a = _check_tensor("isend", tensor)
    dst = _check_rank("isend", g, dst, "dst")
    if dst == g.rank:
        raise ArgumentError(f"isend: rank {g.rank} cannot send to itself")
    return _finish(g, "send", g.backend.send(a, dst, int(tag)), a.nbytes, True)


def irecv(tensor, src=None, group=None, tag=0):
    """Receive into ``tensor`` from rank ``src`` (any rank if None, 'mpi' only); returns a Work."""
    g = _world("irecv", group)
    a = _check_tensor("irecv", tensor)
    if src is not None:
        src = _check_rank("irecv", g, src, "src")
        if src == g.rank:
            raise ArgumentError(f"irecv: rank {g.rank} cannot receive from itself")
    return _finish(g, "recv", g.backend.recv(a, src, None if tag is None else int(tag)), 0, True)


def send(tensor, dst, group=None, tag=0):
    """Send ``tensor`` to rank ``dst`` and wait until its buffer may be reused."""
    isend(tensor, dst, group, tag).wait()


def recv(tensor, src=None, group=None, tag=0):
    """Receive into ``tensor`` from ``src`` (any rank if None); returns the sender's rank."""
    work = irecv(tensor, src, group, tag)
    work.wait()
    return work.source() if hasattr(work, "source") else src


def barrier(group=None, async_op=False):
    """Wait until every rank has reached this barrier."""
    g = _world("barrier", group)
    return _finish(g, "barrier", g.backend.barrier(), 0, async_op)

