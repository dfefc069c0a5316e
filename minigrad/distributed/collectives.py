"""The collectives, with PyTorch's signatures: argument checks here, the moving of bytes in the backend.

Every collective works in place on its tensors' storage and runs nonblocking underneath: with
``async_op=True`` it returns a ``Work`` at once (``wait()`` completes it), otherwise it waits before
returning. ``group``: the world (None) or a group from ``new_group``; as in PyTorch, ``src``/``dst`` are
global ranks, which must belong to the group. Each call is counted and logged by its group (``_finish``).
"""
import numpy as np

from ..errors import ArgumentError, DeviceError
from ..tensor import Tensor
from .process_group import ProcessGroup, ReduceOp, _group

__all__ = ["all_reduce", "broadcast", "all_gather", "reduce_scatter", "all_gather_into_tensor",
           "reduce_scatter_tensor", "send", "recv", "isend", "irecv", "barrier"]


def _world(name, group):
    world = _group()
    if group is None:
        return world
    if not isinstance(group, ProcessGroup):
        raise ArgumentError(f"{name}: this rank (rank {world.rank}) is not a member of the group it was "
                            f"given ({group!r}); only members may call its collectives")
    if group.world is not world:
        raise ArgumentError(f"{name}: the group belongs to a process group that was destroyed")
    return group


def _check_tensor(name, t, what="tensor"):
    if not isinstance(t, Tensor):
        raise ArgumentError(f"{name}: {what} must be a minigrad Tensor, got {type(t).__name__}")
    want = getattr(_group().backend, "device_type", None)
    if want is not None and t.device.type != want:
        raise DeviceError(f"{name}: backend {_group().backend_name!r} needs {want} tensors, got one on "
                          f"{t.device} (move it with .to('{want}'), or use backend 'mpi' for CPU tensors)")
    return t.array


def _check_op(name, op, dtype):
    if not isinstance(op, ReduceOp):
        raise ArgumentError(f"{name}: op must be a ReduceOp (SUM, AVG, PRODUCT, MIN, MAX), got {op!r}")
    if op is ReduceOp.AVG and np.dtype(dtype).kind != "f":
        raise ArgumentError(f"{name}: ReduceOp.AVG needs a floating-point tensor, got {np.dtype(dtype)}")


def _check_rank(name, g, r, what):
    """The group rank of global rank ``r``."""
    if not isinstance(r, (int, np.integer)) or int(r) not in g.ranks:
        where = f"this world of size {g.size}" if g.world is g else f"group {g.name} (ranks {g.ranks})"
        raise ArgumentError(f"{name}: {what}={r!r} is not a rank of {where}")
    return g.ranks.index(int(r))


def _finish(g, name, work, nbytes, async_op, peer=None):
    g.count(name, nbytes, peer)
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


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """``output_tensor`` (size N x the input's) receives every rank's ``input_tensor`` one after another."""
    g = _world("all_gather_into_tensor", group)
    a = _check_tensor("all_gather_into_tensor", input_tensor, "input_tensor")
    out = _check_tensor("all_gather_into_tensor", output_tensor, "output_tensor")
    _check_sizes("all_gather_into_tensor", out, a, g.size, "output_tensor", "input_tensor")
    return _finish(g, "all_gather", g.backend.all_gather_flat(out, a), a.nbytes, async_op)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """``output`` on rank r receives ``op`` over all ranks of the r-th of the N equal parts of ``input``."""
    g = _world("reduce_scatter_tensor", group)
    out = _check_tensor("reduce_scatter_tensor", output, "output")
    a = _check_tensor("reduce_scatter_tensor", input, "input")
    _check_sizes("reduce_scatter_tensor", a, out, g.size, "input", "output")
    _check_op("reduce_scatter_tensor", op, out.dtype)
    return _finish(g, "reduce_scatter", g.backend.reduce_scatter_flat(out, a, op), a.nbytes, async_op)


def _check_sizes(name, big, small, n, big_name, small_name):
    if big.size != n * small.size or big.dtype != small.dtype:
        raise ArgumentError(f"{name}: {big_name} must hold {n} x {small_name}'s {small.size} elements of "
                            f"{small.dtype} (one part per rank), got {big.size} of {big.dtype}")


def isend(tensor, dst, group=None, tag=0):
    """Send ``tensor`` to rank ``dst``; returns a Work (the buffer must stay untouched until it is done)."""
    g = _world("isend", group)
    a = _check_tensor("isend", tensor)
    peer = _check_rank("isend", g, dst, "dst")
    if peer == g.rank:
        raise ArgumentError(f"isend: rank {dst} cannot send to itself")
    return _finish(g, "send", g.backend.send(a, peer, int(tag)), a.nbytes, True, peer=dst)


def irecv(tensor, src=None, group=None, tag=0):
    """Receive into ``tensor`` from rank ``src`` (any rank if None, 'mpi' only); returns a Work."""
    g = _world("irecv", group)
    a = _check_tensor("irecv", tensor)
    peer = None
    if src is not None:
        peer = _check_rank("irecv", g, src, "src")
        if peer == g.rank:
            raise ArgumentError(f"irecv: rank {src} cannot receive from itself")
    work = g.backend.recv(a, peer, None if tag is None else int(tag))
    return _finish(g, "recv", work, a.nbytes, True, peer=src)


def send(tensor, dst, group=None, tag=0):
    """Send ``tensor`` to rank ``dst`` and wait until its buffer may be reused."""
    isend(tensor, dst, group, tag).wait()


def recv(tensor, src=None, group=None, tag=0):
    """Receive into ``tensor`` from ``src`` (any rank if None); returns the sender's rank."""
    work = irecv(tensor, src, group, tag)
    work.wait()
    g = _world("recv", group)
    return g.ranks[work.source()] if hasattr(work, "source") else src


def barrier(group=None, async_op=False):
    """Wait until every rank has reached this barrier."""
    g = _world("barrier", group)
    return _finish(g, "barrier", g.backend.barrier(), 0, async_op)

