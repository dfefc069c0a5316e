"""DistributedDataParallel: one model per rank, gradients averaged over ranks while backward still runs.

The lecture's timeline, in code:

1. Construction checks that every rank has the same parameter shapes, then broadcasts rank 0's
   parameters and buffers, so all replicas start identical.
2. Parameters are grouped into *buckets* in reverse registration order (backward produces gradients
   roughly last layer first): the first bucket holds up to 1 MiB, the others up to ``bucket_cap_mb``.
3. A post-accumulate-grad hook on each parameter counts it ready; when a bucket's last gradient arrives its
   gradients are flattened into one buffer and an asynchronous all-reduce starts at once, overlapping the
   rest of backward. Buckets start strictly in order, so every rank issues the same collectives in the
   same order even when gradients become ready in a different order.
4. At the end of backward (``engine.queue_callback``) every bucket is waited for and the averaged
   gradients are written back into ``.grad``.

``register_comm_hook(state, hook)`` replaces a bucket's all-reduce by ``hook(state, GradBucket) -> future``
(``algorithms/ddp_comm_hooks``: fp16 compression, PowerSGD), as PyTorch's. ``process_group``: average over a
subgroup (DP inside a DP×TP or DP×PP mesh).

Deliberate differences from PyTorch: a bucket never grows past its cap (a single larger tensor gets a
bucket of its own; PyTorch closes a bucket only after it passes the cap); buckets are copied into and out
of a flat buffer rather than aliased by ``.grad`` (``gradient_as_bucket_view`` is not offered).
``timeline`` holds the last synchronised backward's recorded events (the lecture plots it); a bucket's
all-reduce counts from the moment DDP hands it over, so time the backend's call takes is not drawn as DDP
starting late.
"""
import contextlib
import json
import time

from ..autograd import engine
from ..autograd.grad_mode import no_grad
from ..errors import DistributedError
from ..nn.module import Module
from ..tensor import Tensor
from . import collectives
from .process_group import ReduceOp, _group

__all__ = ["DistributedDataParallel", "GradBucket"]

MiB = 1 << 20
_instances = 0  # DDP objects built in this process: the store key for their shape check


class _Bucket:
    def __init__(self, index):
        self.index, self.members, self.nbytes = index, [], 0  # members: (name, param)
        self.pending = 0
        self.work = self.flat = None
        self.handed_at = None  # when DDP handed the bucket to the all-reduce (before the backend's call)

    def __repr__(self):
        return f"<bucket {self.index}: {len(self.members)} tensors, {self.nbytes} bytes>"


def assign_buckets(named_params, cap_bytes, first_cap_bytes=MiB):
    """Group (name, param) pairs into buckets, in reverse order: the first up to ``first_cap_bytes``, the
    rest up to ``cap_bytes``; a new bucket also starts where the dtype or device changes."""
    buckets = [_Bucket(0)]
    for name, p in reversed(list(named_params)):
        b = buckets[-1]
        cap = first_cap_bytes if b.index == 0 else cap_bytes
        nbytes = p.array.nbytes
        if b.members and (b.nbytes + nbytes > cap or p.dtype != b.members[0][1].dtype
                          or p.device != b.members[0][1].device):
            b = _Bucket(len(buckets))
            buckets.append(b)
        b.members.append((name, p))
        b.nbytes += nbytes
    return [b for b in buckets if b.members]


class DistributedDataParallel(Module):
    """``DistributedDataParallel(module, bucket_cap_mb=25, find_unused_parameters=False,
    broadcast_buffers=True)``: wrap ``module`` so that ``loss.backward()`` leaves every rank holding the
    gradients averaged over all ranks. ``no_sync()`` skips the averaging (gradient accumulation)."""

    def __init__(self, module, device_ids=None, output_device=None, broadcast_buffers=True, process_group=None,
                 bucket_cap_mb=25, find_unused_parameters=False, first_bucket_cap_mb=1):
        global _instances
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel: module must be an nn.Module, got {type(module).__name__}")
        self.module = module
        self.broadcast_buffers = bool(broadcast_buffers)
        self.find_unused_parameters = bool(find_unused_parameters)
        self.require_sync = True
        self.timeline = []
        self.process_group = process_group
        self._comm_hook = None
        g = _group() if process_group is None else process_group
        _instances += 1
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        if not named:
            raise DistributedError("DistributedDataParallel: the module has no parameter that requires grad")
        _check_same_shapes(g, f"{g.world.prefix}{g.name}/ddp{_instances}", named)
        with no_grad():
            for _, t in list(module.named_parameters()) + list(module.named_buffers()):
                collectives.broadcast(t, g.ranks[0], group=process_group)
        self.buckets = assign_buckets(named, int(bucket_cap_mb * MiB), int(first_bucket_cap_mb * MiB))
        self._where = {id(p): b for b in self.buckets for _, p in b.members}
        self._step = None  # per-backward state while a synchronised backward runs
        self._sync_now, self._unused = False, set()
        self._handles = [p.register_post_accumulate_grad_hook(self._grad_ready) for _, p in named]

    # --- forward ---------------------------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        g = _group() if self.process_group is None else self.process_group
        if self.broadcast_buffers and g.size > 1:
            with no_grad():
                for _, buf in self.module.named_buffers():
                    collectives.broadcast(buf, g.ranks[0], group=self.process_group)
        out = self.module(*args, **kwargs)
        self._sync_now = self.require_sync
        self._step = None
        self._unused = self._find_unused(out) if self._sync_now and self.find_unused_parameters else set()
        return out

    @contextlib.contextmanager
    def no_sync(self):
        """Inside: backward only accumulates local gradients; the first backward after it averages them."""
        old, self.require_sync = self.require_sync, False
        try:
            yield
        finally:
            self.require_sync = old

    def _find_unused(self, out):
        roots = [t.grad_fn for t in _tensors(out) if t.grad_fn is not None]
        reached = {id(node.tensor_ref()) for node in engine.topological_order(roots)
                   if hasattr(node, "tensor_ref")}
        return {id(p) for b in self.buckets for _, p in b.members if id(p) not in reached}

    # --- backward: hooks launch buckets, the end-of-backward callback waits ------------------------------
    def _start_step(self):
        for b in self.buckets:
            b.pending, b.work, b.flat = len(b.members), None, None
        self._step = {"next": 0, "t0": time.perf_counter(), "ready": set(self._unused)}
        self.timeline = []
        engine.queue_callback(self._finish)
        for pid in self._unused:
            self._where[pid].pending -= 1

    def _grad_ready(self, p):
        if not self._sync_now:
            return
        if self._step is None:
            self._start_step()
        self.timeline.append({"kind": "grad", "t": time.perf_counter(), "bucket": self._where[id(p)].index})
        self._where[id(p)].pending -= 1
        self._step["ready"].add(id(p))
        self._launch_ready()
        for b in self.buckets[:self._step["next"]]:
            b.work.is_completed()  # MPI progresses only inside MPI calls: poke the buckets in flight

    def _launch_ready(self):
        step = self._step
        while step["next"] < len(self.buckets) and self.buckets[step["next"]].pending == 0:
            b = self.buckets[step["next"]]
            p0 = b.members[0][1]
            xp = p0.device.xp
            parts = [(p.grad.array if p.grad is not None else xp.zeros(p.shape, p.array.dtype)).reshape(-1)
                     for _, p in b.members]
            b.flat = Tensor._make(xp.concatenate(parts), p0.device)
            b.handed_at = time.perf_counter()  # not Work.issued_at: that is stamped after the call returns
            if self._comm_hook is None:
                b.work = collectives.all_reduce(b.flat, ReduceOp.AVG, group=self.process_group, async_op=True)
            else:
                state, hook = self._comm_hook
                b.work = hook(state, GradBucket(b, len(self.buckets)))
            step["next"] += 1

    def _finish(self):
        step = self._step
        try:
            self._launch_ready()
        finally:
            self._step, self._sync_now = None, False
        if step["next"] < len(self.buckets):
            missing = [n for b in self.buckets[step["next"]:] for n, p in b.members if id(p) not in step["ready"]]
            raise DistributedError(
                f"DistributedDataParallel: bucket {step['next']} never became ready: parameter(s) "
                f"{_short(missing)} got no gradient in this backward. Make sure every parameter is used in "
                f"the loss, or pass find_unused_parameters=True")
        end = time.perf_counter()
        with no_grad():
            for b in self.buckets:
                result = b.work.wait()
                if self._comm_hook is not None:  # a hook's future gives the reduced bucket
                    b.flat = result
                offset = 0
                for _, p in b.members:
                    part = b.flat.array[offset:offset + p.numel()].reshape(p.shape)
                    offset += p.numel()
                    if p.grad is None:
                        p.grad = Tensor._make(part.copy(), p.device)
                    else:
                        p.grad.array[...] = part
                self.timeline.append({"kind": "all_reduce", "bucket": b.index, "bytes": b.nbytes,
                                      "issued": b.handed_at, "returned": b.work.issued_at,
                                      "completed": b.work.completed_at})
                b.flat = b.work = None
        self.timeline.append({"kind": "backward", "start": step["t0"], "end": end})

    def register_comm_hook(self, state, hook):
        """Reduce each bucket with ``hook(state, bucket: GradBucket)``, which returns a future whose ``wait()``
        gives the averaged flat gradients (and has ``is_completed()``, ``issued_at``, ``completed_at``).
        Call it once, before the first backward (PyTorch's rule)."""
        if self._comm_hook is not None:
            raise DistributedError("DistributedDataParallel.register_comm_hook: a communication hook is already "
                                   "registered (only one may be)")
        if not callable(hook):
            raise TypeError(f"register_comm_hook: hook must be callable, got {type(hook).__name__}")
        self._comm_hook = (state, hook)

    @property
    def bucket_sizes(self):
        """Bytes per bucket, in launch order."""
        return [b.nbytes for b in self.buckets]

    def extra_repr(self):
        return f"buckets={len(self.buckets)}, bucket bytes={self.bucket_sizes}"


class GradBucket:
    """What a communication hook sees of one bucket (PyTorch's names): ``buffer()`` the flat gradients,
    ``gradients()`` one view of it per parameter, ``parameters()``, ``index()``, ``is_last()``."""

    def __init__(self, bucket, count):
        self._bucket, self._count = bucket, count

    def index(self):
        return self._bucket.index

    def buffer(self):
        return self._bucket.flat

    def parameters(self):
        return [p for _, p in self._bucket.members]

    def gradients(self):
        flat, out, offset = self._bucket.flat, [], 0
        for _, p in self._bucket.members:
            out.append(Tensor._make(flat.array[offset:offset + p.numel()].reshape(p.shape), flat.device))
            offset += p.numel()
        return out

    def is_last(self):
        return self._bucket.index == self._count - 1


def _tensors(obj):
    if isinstance(obj, Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _tensors(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _tensors(o)


def _short(names, limit=8):
    return ", ".join(repr(n) for n in names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _check_same_shapes(g, key, named, who="DistributedDataParallel"):
    """All ranks must wrap the same architecture. Each rank leaves its list of (name, shape, dtype) in the
    store and compares the others' with its own: a mismatch names the first parameter that differs."""
    if g.size == 1:
        return
    listing = [[n, list(p.shape), str(p.dtype)] for n, p in named]
    g.store.set(f"{key}/params/{g.rank}", json.dumps(listing))
    for r in range(g.size):
        theirs = json.loads(g.store.get(f"{key}/params/{r}"))
        if theirs != listing:
            raise DistributedError(f"{who}: rank {g.global_rank} and rank {g.ranks[r]} wrap different "
                                   f"models: {_first_difference(listing, theirs, g.global_rank, g.ranks[r])}")


def _first_difference(mine, theirs, me, other):
    for (n1, s1, d1), (n2, s2, d2) in zip(mine, theirs):
        if (n1, s1, d1) != (n2, s2, d2):
            return (f"parameter {n1!r} has shape {tuple(s1)} ({d1}) on rank {me} but {n2!r} has shape "
                    f"{tuple(s2)} ({d2}) on rank {other}")
    return f"{len(mine)} parameters on rank {me}, {len(theirs)} on rank {other}"

