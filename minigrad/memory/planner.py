"""An offline memory planner: one training step's tensors placed at fixed offsets of a single arena.

A caching pool decides online: each request is served from whatever is free *now*, without knowing what
comes next, so it needs more memory than is ever live at once (fragmentation, segment rounding). A
static graph lets a compiler plan instead: every tensor's size and lifetime is known in advance, and
offsets can be chosen so that tensors alive at the same time never overlap. Here the "graph" is one
recorded step:

1. ``record(step)`` runs ``step()`` once with a fresh pool and its history on, and turns the alloc/free
   events into ``Lifetime`` intervals ``[start, end)`` (event numbers) with sizes and causes.
2. ``plan(lifetimes)`` assigns offsets greedily by size (Pisarchyk & Lee, 2020: largest first, each in
   the smallest gap left by the already placed tensors whose lifetimes overlap it, else on top).
3. ``lower_bound(lifetimes)``: the most bytes ever live at once; no arena can be smaller.
4. ``replay(step, plan)`` runs the step again with an allocator that serves the k-th request at the
   k-th planned offset, checking sizes and that no live tensor is overlapped; the results must be
   identical to the recorded run's.

Cyclic garbage collection would free blocks at unpredictable moments, so recording and replaying run with
``gc`` disabled: frees then happen by reference counting only, in the same order both times.
"""
import gc
from collections import namedtuple

import numpy as np

from ..errors import MinigradError
from .allocator import CachingAllocator, Block, Segment, round_size, pool_of
from .history import MemoryHistory
from .pools import enabled, get_allocator
from .sources import CPUSource


class PlannerError(MinigradError, RuntimeError):
    """A plan that overlaps live tensors, or a replay that does not follow the recorded step."""


Lifetime = namedtuple("Lifetime", "index size requested start end cause label op")
Lifetime.__doc__ = """One allocation of the step: live during events ``[start, end)``; ``size`` is the
pool's rounded block size, ``cause`` the op (or label) that made it, ``op`` the op (None outside ops)."""

Plan = namedtuple("Plan", "offsets arena_size")
Plan.__doc__ = "Offsets (bytes into the arena, one per lifetime, by index) and the arena's size."


class Trace(namedtuple("Trace", "lifetimes result peak_reserved peak_allocated events")):
    """What ``record`` returns: the lifetimes, ``step()``'s result, the pool's peaks, the raw events."""


def lifetimes_from_events(events):
    """``Lifetime`` intervals from a memory history (``snapshot()['events']``). Sizes are the requests
    rounded to 512 B (the pool may serve one from a larger cached block it does not split). Blocks still
    live at the end get ``end`` = one past the last event; frees of blocks allocated before recording
    are ignored."""
    open_blocks, out = {}, []
    n = 0
    for e in events:
        n = e["seq"] + 1
        if e["action"] == "alloc":
            open_blocks[e["address"]] = len(out)
            size = round_size(e["requested"])     # not the block: the pool may hand out a larger one
            out.append([len(out), size, e["requested"], e["seq"], None, e["cause"], e["label"], e["op"]])
        elif e["action"] == "free":
            i = open_blocks.pop(e["address"], None)
            if i is not None:
                out[i][4] = e["seq"]
    for item in out:
        if item[4] is None:
            item[4] = n
    return [Lifetime(*item) for item in out]


def record(step, device="cpu", tight=False):
    """Run ``step()`` once on a fresh pool with history on (``tight``: the pool's tight mode, see
    ``set_memory_limit``); returns a ``Trace``."""
    alloc = CachingAllocator(_source_like(get_allocator(device)), str(device))
    alloc.tight = tight
    with _no_gc(), enabled(device, allocator=alloc):
        alloc.history = MemoryHistory(max_entries=None)
        result = step()
        events = [dict(e) for e in alloc.history.events]
        alloc.history = None
    top = alloc.stats["all"]
    return Trace(lifetimes_from_events(events), result, top.reserved_bytes.peak, top.allocated_bytes.peak,
                 events)


def lower_bound(lifetimes, select=None):
    """The most bytes live at once (over the lifetimes ``select(lifetime)`` keeps, default all)."""
    changes = []
    for lt in lifetimes:
        if select is None or select(lt):
            changes.append((lt.start, lt.size))
            changes.append((lt.end, -lt.size))
    changes.sort()        # a free and an alloc never share an event number
    live = peak = 0
    for _, delta in changes:
        live += delta
        peak = max(peak, live)
    return peak


def forward_only(lifetime):
    """``select`` for ``lower_bound``: allocations made by forward ops (activations, recomputed ones
    included), not by backward ops (``"<op>.backward"``: gradients) or outside ops."""
    return lifetime.op is not None and not lifetime.op.endswith(".backward")


def plan(lifetimes, alignment=512):
    """Greedy-by-size offsets: largest first, each in the smallest gap that fits among the placed
    tensors whose lifetimes overlap it (else above them all). Returns a ``Plan``."""
    n = len(lifetimes)
    size = np.array([lt.size for lt in lifetimes], dtype=np.int64)
    start = np.array([lt.start for lt in lifetimes], dtype=np.int64)
    end = np.array([lt.end for lt in lifetimes], dtype=np.int64)
    if np.any(size % alignment):
        raise PlannerError(f"plan: sizes must be multiples of the alignment ({alignment} bytes)")
    offsets = np.full(n, -1, dtype=np.int64)
    placed = np.zeros(n, dtype=bool)
    for i in sorted(range(n), key=lambda i: (-size[i], start[i], i)):
        near = np.flatnonzero(placed & (start < end[i]) & (end > start[i]))
        offsets[i] = _best_gap(offsets[near], size[near], size[i])
        placed[i] = True
    arena = int((offsets + size).max()) if n else 0
    return Plan([int(o) for o in offsets], arena)


def _best_gap(offs, sizes, need):
    """Lowest-waste gap of at least ``need`` bytes between blocks ``[offs, offs + sizes)``."""
    order = np.argsort(offs, kind="stable")
    best, best_gap, top = None, None, 0
    for o, s in zip(offs[order], sizes[order]):
        gap = int(o) - top
        if gap >= need and (best_gap is None or gap < best_gap):
            best, best_gap = top, gap
        top = max(top, int(o + s))
    return top if best is None else best


def check_plan(lifetimes, plan_or_offsets, arena_size=None):
    """Raise ``PlannerError`` unless every offset is aligned, inside the arena, and no two tensors with
    overlapping lifetimes overlap in memory. Returns the arena size the offsets need."""
    offsets = list(getattr(plan_or_offsets, "offsets", plan_or_offsets))
    if arena_size is None:
        arena_size = getattr(plan_or_offsets, "arena_size", None)
    if len(offsets) != len(lifetimes):
        raise PlannerError(f"check_plan: {len(offsets)} offsets for {len(lifetimes)} lifetimes")
    for lt, o in zip(lifetimes, offsets):
        if not isinstance(o, (int, np.integer)) or o < 0 or o % 512:
            raise PlannerError(f"check_plan: tensor {lt.index} ({lt.cause}) has offset {o!r}; offsets must "
                               f"be non-negative multiples of 512")
    need = max((o + lt.size for lt, o in zip(lifetimes, offsets)), default=0)
    if arena_size is not None and need > arena_size:
        raise PlannerError(f"check_plan: the offsets need {need} bytes but the arena has {arena_size}")
    by_start = sorted(range(len(lifetimes)), key=lambda i: lifetimes[i].start)
    live = []                               # indices live at the current start
    for i in by_start:
        a = lifetimes[i]
        live = [j for j in live if lifetimes[j].end > a.start]
        for j in live:
            if offsets[i] < offsets[j] + lifetimes[j].size and offsets[j] < offsets[i] + a.size:
                b = lifetimes[j]
                raise PlannerError(
                    f"check_plan: tensors {b.index} ({b.cause}, events [{b.start}, {b.end})) and {a.index} "
                    f"({a.cause}, events [{a.start}, {a.end})) are live at the same time but overlap in "
                    f"memory (offsets {offsets[j]} + {b.size} and {offsets[i]} + {a.size})")
        live.append(i)
    return need


class PlannedAllocator(CachingAllocator):
    """Serves the k-th request of a replayed step at the k-th planned offset of one arena.

    Same interface as ``CachingAllocator`` (so ``minigrad.memory.enabled(allocator=...)`` takes it and
    the statistics work). Requests made by ops must follow the recording exactly. The engine's few
    allocations outside ops (defensive copies of shared gradients) depend on Python object ids, so they
    may come and go between runs: an extra one is served from a side pool (``spilled`` counts them), a
    missing one leaves its slot unused. A request that would overlap a live block raises
    ``PlannerError`` instead of corrupting a tensor.
    """

    def __init__(self, lifetimes, plan, source=None, device_name="cpu"):
        super().__init__(source or CPUSource(), device_name)
        self.lifetimes, self.plan = lifetimes, plan
        self.next = 0
        self.live = {}                      # id(block) -> (k, block) for live planned blocks
        self.side = CachingAllocator(self.source, device_name)
        self.spilled = 0
        address, handle = self.source.allocate(max(plan.arena_size, 512))
        self.arena = Segment(0, address, max(plan.arena_size, 512), "large_pool", handle)
        for stats in self._scopes["large_pool"]:
            stats.add_segment(self.arena.size)

    def _match(self, k, size, cause):
        lt = self.lifetimes[k]
        return lt.size == size and lt.op == cause

    def malloc(self, nbytes, cause=None):
        size, k, n = round_size(nbytes), self.next, len(self.lifetimes)
        while k < n and not self._match(k, size, cause) and self.lifetimes[k].op is None:
            k += 1                          # recorded copies outside ops that this run did not make
        if k >= n or not self._match(k, size, cause):
            if cause is None:               # an extra copy outside ops: not planned, served aside
                self.spilled += 1
                return self.side.malloc(nbytes, cause)
            lt = self.lifetimes[min(self.next, n - 1)] if n else None
            raise PlannerError(f"replay: request {self.next} ({cause}, {size} bytes) does not match the "
                               f"recorded step's ({lt.cause if lt else 'none'}, {lt.size if lt else 0} bytes); "
                               f"the step must allocate the same way every time")
        offset = self.plan.offsets[k]
        for j, other in self.live.values():
            if offset < other.offset + other.size and other.offset < offset + size:
                raise PlannerError(f"replay: request {k} ({cause}) at offset {offset} overlaps live block "
                                   f"{j} ({self.lifetimes[j].cause}) at offset {other.offset}: its "
                                   f"lifetime was planned to have ended")
        self.next = k + 1
        block = Block(self.arena, offset, size)
        block.allocated, block.requested, block.cause = True, nbytes, cause
        self.live[id(block)] = (k, block)
        for stats in self._scopes[pool_of(size)]:
            stats.add_block(size, nbytes)
        return block

    def free(self, block):
        if block.segment is not self.arena:
            return self.side.free(block)
        self.live.pop(id(block), None)
        for stats in self._scopes[pool_of(block.size)]:
            stats.remove_block(block.size, block.requested)
        block.allocated = False

    def empty_cache(self):
        return self.side.empty_cache()


def replay(step, lifetimes, plan, device="cpu"):
    """Run ``step()`` with every allocation at its planned offset; returns ``step()``'s result."""
    check_plan(lifetimes, plan)
    alloc = PlannedAllocator(lifetimes, plan, _source_like(get_allocator(device)), str(device))
    with _no_gc(), enabled(device, allocator=alloc):
        result = step()
    missing = [lt for lt in lifetimes[alloc.next:] if lt.op is not None]
    if missing:
        raise PlannerError(f"replay: the step ended before {len(missing)} of the recorded allocations by "
                           f"ops (first: {missing[0].cause}, {missing[0].size} bytes)")
    return result


def _source_like(alloc):
    return type(alloc.source)() if isinstance(alloc.source, CPUSource) else alloc.source


class _no_gc:
    def __enter__(self):
        gc.collect()
        self.was = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc):
        if self.was:
            gc.enable()
        return False
