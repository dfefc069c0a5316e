"""minigrad.memory: a caching memory pool with PyTorch-style statistics, snapshots and plots.

Read ``allocator.py`` first: it is the algorithm (best fit, split, coalesce, empty_cache, OOM retry).
The other modules connect it to devices and to people:

    sources.py     raw memory for segments: CPUSource (NumPy arenas), SimulatedSource (addresses only)
    cupy_pool.py   cudaMalloc segments, and the hook that makes CuPy allocate through the pool
    storage.py     NumPy tensor storage (cpu, and the cuda emulator): arrays viewing pool blocks,
                   freed with their last view
    stats.py       memory_stats() dicts and the memory_summary() table
    history.py     record_memory_history(), label(), snapshot events
    plot.py        plot_timeline()
    planner.py     an offline planner: one step's lifetimes packed into one arena (vs the pool's peak)

Usage::

    import minigrad.memory as mem
    mem.enable()                          # cpu tensors now live in the pool (mem.disable() to undo)
    mem.set_memory_limit(8 * 2**30)       # behave like an 8 GB card (tight=True: bytes before caching)
    mem.record_memory_history(True)
    with mem.label("forward"):
        loss = model(x)
    print(mem.memory_summary())
    mem.plot_timeline(path="timeline.png")

How the core is reached (it never imports this package): two hooks.

- Storage: when a pool is enabled on a device, that device's backend has ``backend.allocator`` set to a
  storage adapter; ``ArrayBackend.empty``/``adopt`` (the only places storage is made) defer to it, and
  ``Function.apply`` adopts each op's result and saved arrays through it.
- Labels: ``op_labels.py`` registers a forward wrapper and a backward wrapper on the core's extension
  points (``minigrad/autograd/extensions.py``), process-wide: around each op they set the adapter's
  ``current_op`` (per thread) to the op's name (``"<op>.backward"`` in backward). Every block allocated
  while ``current_op`` is set records it as its cause; ``with mem.label('forward'):`` labels the rest.

``pools.py`` holds the API below (one pool per device, switching it on and off, statistics, history).

"""
from . import cupy_pool, history, op_labels, planner, pools  # noqa: F401
from .allocator import KiB, MiB, Block, CachingAllocator, Segment, round_size, segment_size
from .history import label
from .pools import (disable, empty_cache, enable, enabled, fragmentation, get_allocator, get_memory_limit,
                    is_enabled, max_memory_allocated, max_memory_reserved, memory_allocated, memory_requested,
                    memory_reserved, memory_stats, memory_summary, plot_timeline, record_memory_history,
                    reset_accumulated_memory_stats, reset_peak_memory_stats, save_snapshot, set_memory_limit,
                    snapshot)
from .sources import CPUSource, SimulatedSource
from .stats import format_bytes, fragmentation_of, free_holes
from .storage import NumpyStorage, block_of, views_pool_block
from ..errors import OutOfMemoryError

__all__ = [
    "Block", "CPUSource", "CachingAllocator", "KiB", "MiB", "NumpyStorage", "OutOfMemoryError", "Segment",
    "SimulatedSource", "block_of", "disable", "empty_cache", "enable", "enabled", "format_bytes",
    "fragmentation", "fragmentation_of", "free_holes", "get_allocator", "get_memory_limit", "is_enabled", "label", "max_memory_allocated",
    "max_memory_reserved", "memory_allocated", "memory_requested", "memory_reserved", "memory_stats",
    "memory_summary", "planner", "plot_timeline", "record_memory_history", "reset_accumulated_memory_stats",
    "reset_peak_memory_stats", "round_size", "save_snapshot", "segment_size", "set_memory_limit",
    "snapshot", "views_pool_block",
]
