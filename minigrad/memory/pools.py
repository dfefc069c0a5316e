"""One caching allocator per device, switching it on and off, and PyTorch's memory API on top of it
(statistics, limits, history and snapshots). ``minigrad.memory`` re-exports all of it.

Devices: ``device=None`` means cpu. One CachingAllocator per device, created on first use and kept for
the session, so statistics survive ``disable()``; arrays that still view pool blocks keep returning them.
The pool is process-wide by nature (it owns each device's storage); what a thread labels is its own.
"""
import json
from contextlib import contextmanager

import numpy as np

from ..backend import device as _device, get_backend
from ..errors import ArgumentError, DeviceError
from . import cupy_pool, history as _history, op_labels
from .allocator import CachingAllocator
from .sources import CPUSource
from .stats import memory_stats as _memory_stats, summary as _summary
from .storage import NumpyStorage

_ALLOCATORS = {}   # str(device) -> CachingAllocator
_STORAGE = {}      # str(device) -> the storage adapter installed on that device's backend


def _dev(device):
    return _device("cpu" if device is None else device)


def get_allocator(device=None):
    """The device's CachingAllocator (created on first use; segments are requested only when needed)."""
    dev = _dev(device)
    alloc = _ALLOCATORS.get(str(dev))
    if alloc is None:
        source = CPUSource() if _is_numpy(dev) else cupy_pool.CupySource(dev.index)
        alloc = _ALLOCATORS[str(dev)] = CachingAllocator(source, str(dev))
    return alloc


def _is_numpy(dev):
    """Does the device compute with NumPy? (cpu, and the test emulator of cuda): then its pool owns
    host arenas; otherwise it is a real GPU and CuPy allocates through the pool."""
    if dev.type == "cpu":
        return True
    try:
        return get_backend(dev).xp is np
    except DeviceError:                     # no CUDA here: the allocator will only ever report zeros
        return False


# --- switching the pool on and off ----------------------------------------------------------------
def enable(device="cpu", allocator=None):
    """Make the pool own the device's tensor storage. ``allocator``: a replacement CachingAllocator
    (same interface; e.g. a student's) to use from now on for this device."""
    dev = _dev(device)
    if allocator is not None:
        _ALLOCATORS[str(dev)] = allocator
    alloc = get_allocator(dev)
    be = get_backend(dev)
    storage = _STORAGE.get(str(dev))
    if storage is not None and storage.allocator is alloc and be.allocator is storage:
        return alloc                        # already on: keep the adapter (and its current_op)
    if be.xp is np:                         # cpu, or the NumPy emulator of cuda
        storage = NumpyStorage(alloc)
    else:
        storage = cupy_pool.CupyStorage(alloc, be.xp)
    _STORAGE[str(dev)] = storage
    be.allocator = storage
    op_labels.install()
    if isinstance(storage, cupy_pool.CupyStorage):
        cupy_pool.install(_resolve_cuda)    # CuPy's allocator is global: it serves every device
    return alloc


def disable(device="cpu", empty_cache=True):
    """Back to plain NumPy/CuPy allocation; cached free segments are released unless ``empty_cache`` is
    False. Arrays still viewing pool blocks stay valid and return their blocks when they die."""
    dev = _dev(device)
    storage = _STORAGE.pop(str(dev), None)
    if storage is None:
        return
    be = get_backend(dev)
    if be.allocator is storage:
        be.allocator = None
    if isinstance(storage, cupy_pool.CupyStorage):
        if any(isinstance(s, cupy_pool.CupyStorage) for s in _STORAGE.values()):
            cupy_pool.refresh()
        else:
            cupy_pool.uninstall()
    if not _STORAGE:
        op_labels.uninstall()
    if empty_cache:
        storage.allocator.empty_cache()


def is_enabled(device="cpu"):
    """Is the pool installed on the device's backend?"""
    dev = _dev(device)
    storage = _STORAGE.get(str(dev))
    return storage is not None and get_backend(dev).allocator is storage


@contextmanager
def enabled(device="cpu", allocator=None):
    """``with mem.enabled():`` the pool inside the block, the previous state after it. With
    ``allocator``, that allocator serves the device inside the block (the previous one comes back)."""
    dev = _dev(device)
    was, previous = is_enabled(dev), _ALLOCATORS.get(str(dev))
    alloc = enable(dev, allocator) if not was or allocator is not None else get_allocator(dev)
    try:
        yield alloc
    finally:
        if allocator is not None:           # the device's own allocator serves it again
            if previous is None:
                _ALLOCATORS.pop(str(dev), None)
            else:
                _ALLOCATORS[str(dev)] = previous
        if not was:
            disable(dev)
        elif allocator is not None:
            enable(dev)


def _resolve_cuda(device_id):
    """(allocator, storage) of a cuda device, for the CuPy hook (storage None if not enabled there)."""
    return get_allocator(f"cuda:{device_id}"), _STORAGE.get(f"cuda:{device_id}")


# --- statistics (PyTorch's names) --------------------------------------------------------------------
def _stat(device, name, amount):
    alloc = _ALLOCATORS.get(str(_dev(device)))
    return 0 if alloc is None else getattr(getattr(alloc.stats["all"], name), amount)


def memory_allocated(device=None):
    """Bytes in live blocks (rounded to 512 B, as PyTorch counts)."""
    return _stat(device, "allocated_bytes", "current")


def max_memory_allocated(device=None):
    """Peak of memory_allocated since the start or the last reset_peak_memory_stats."""
    return _stat(device, "allocated_bytes", "peak")


def memory_requested(device=None):
    """Bytes callers asked for in live blocks, before rounding."""
    return _stat(device, "requested_bytes", "current")


def memory_reserved(device=None):
    """Bytes in segments held by the pool (live blocks plus cache)."""
    return _stat(device, "reserved_bytes", "current")


def max_memory_reserved(device=None):
    """Peak of memory_reserved."""
    return _stat(device, "reserved_bytes", "peak")


def reset_peak_memory_stats(device=None):
    """Peaks restart from the current values (measure one phase of a program)."""
    get_allocator(device).reset_peak_stats()


def reset_accumulated_memory_stats(device=None):
    """Zero the cumulative counters (.allocated/.freed, retries, OOMs)."""
    get_allocator(device).reset_accumulated_stats()


def memory_stats(device=None):
    """Flat dict, PyTorch's keys: 'allocated_bytes.all.current', 'segment.small_pool.peak', 'num_ooms'..."""
    return _memory_stats(get_allocator(device))


def memory_summary(device=None):
    """A readable table of memory_stats (like torch.cuda.memory_summary)."""
    return _summary(get_allocator(device))


def fragmentation(device=None):
    """1 - largest free cached block / all free cached bytes (0: one usable piece, ~1: crumbs); the
    definition is ``stats.fragmentation_of``, shared with lecture 02 and the a2 grader."""
    return get_allocator(device).fragmentation()


def empty_cache(device=None):
    """Release every entirely free segment to the device; returns the bytes released."""
    return get_allocator(device).empty_cache()


def set_memory_limit(nbytes, device=None, *, tight=False):
    """Cap the device's reserved bytes (None: no cap), e.g. 8 * 2**30 to behave like an 8 GB card.
    ``tight``: the pool trades its cache for bytes (a training run under a budget; ``allocator.py``'s
    steps 4b and 4c): near the limit a new segment is just the block, and on CPU the arrays NumPy makes
    for ops' results become segments of their own instead of being copied into blocks."""
    alloc = get_allocator(device)
    if tight and not hasattr(alloc, "borrow"):
        raise ArgumentError(f"set_memory_limit: tight=True needs an allocator with the tight mode "
                            f"(minigrad's CachingAllocator), not {type(alloc).__name__}")
    alloc.memory_limit = None if nbytes is None else int(nbytes)
    if tight or hasattr(alloc, "tight"):     # an allocator of another design (a student's) has no tight mode
        alloc.tight = bool(tight)


def get_memory_limit(device=None):
    return get_allocator(device).memory_limit


# --- history and snapshots ---------------------------------------------------------------------------
def record_memory_history(enabled=True, device=None, max_entries=100_000):
    """Start (a fresh log) or stop recording alloc/free/segment events with their cause."""
    alloc = get_allocator(device)
    alloc.history = _history.MemoryHistory(max_entries) if enabled else None


def snapshot(device=None):
    """Events recorded so far plus the current segments and blocks, as plain JSON-serialisable data."""
    return _snapshot(device)


def _snapshot(device):
    alloc = get_allocator(device)
    segments = [{"address": seg.address, "size": seg.size, "pool": seg.pool,
                 "blocks": [{"address": b.address, "offset": b.offset, "size": b.size,
                             "requested": b.requested, "cause": b.cause,
                             "state": "active_allocated" if b.allocated else "inactive"}
                            for b in seg.blocks()]}
                for seg in sorted(alloc.segments.values(), key=lambda s: s.address)]
    hist = alloc.history
    return {"device": alloc.device_name,
            "recording": hist is not None,
            "events": [] if hist is None else [dict(e) for e in hist.events],
            "segments": segments,
            "stats": _memory_stats(alloc)}


def save_snapshot(path, device=None):
    """Write snapshot() as JSON (for an autograder or a later plot)."""
    with open(path, "w") as f:
        json.dump(snapshot(device), f)


def plot_timeline(snapshot=None, by="op", ax=None, path=None, device=None, top=12):
    """Allocated bytes over the event sequence, stacked by 'op', 'label' or 'tensor', with reserved
    bytes as a line. Draws on ``ax`` (or a new figure), saves to ``path`` if given; returns the axes."""
    from .plot import plot_timeline as _plot
    snap = _snapshot(device) if snapshot is None else snapshot
    return _plot(snap, by=by, ax=ax, path=path, top=top)
