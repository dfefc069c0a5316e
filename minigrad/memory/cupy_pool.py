"""The GPU side of the pool: cudaMalloc'd segments, and minigrad's allocator installed into CuPy.

The only module of minigrad.memory that touches cupy, and only inside functions (cupy is optional).

CuPy lets a program replace its allocator: ``cupy.cuda.set_allocator(f)`` where ``f(nbytes)`` returns a
``MemoryPointer``. ``PythonFunctionAllocator(malloc_fn, free_fn)`` builds such an ``f`` from two plain
functions: ``malloc_fn(nbytes, device_id) -> pointer (int)`` and ``free_fn(pointer, device_id)``, the latter
called when CuPy drops the memory (the last array using it is gone). So once installed, *every* CuPy
allocation (tensor storage, temporaries inside kernels' wrappers, cuBLAS workspaces) goes through
``CachingAllocator.malloc``/``free`` and the statistics are complete.

Segments must come from ``cupy.cuda.Memory(nbytes)``, which calls cudaMalloc directly; ``cupy.cuda.alloc``
would call the current allocator, i.e. ourselves. Like CuPy's own pool this assumes one stream: a freed
block may be reused by the next kernel, which is safe because kernels on one stream run in order.
"""

from .history import OpLabelled

_CUDA_ERROR_MEMORY_ALLOCATION = 2   # cudaErrorMemoryAllocation


class CupySource:
    """Segments from cudaMalloc on device ``device_id`` (cupy imported on first use)."""

    def __init__(self, device_id=0):
        self.device_id = device_id

    def allocate(self, nbytes):
        import cupy
        try:
            with cupy.cuda.Device(self.device_id):
                mem = cupy.cuda.Memory(nbytes)
        except cupy.cuda.runtime.CUDARuntimeError as e:
            if getattr(e, "status", None) == _CUDA_ERROR_MEMORY_ALLOCATION:
                return None
            raise
        except MemoryError:
            return None
        return mem.ptr, mem

    def release(self, handle):
        pass    # the allocator drops the handle; cupy.cuda.Memory calls cudaFree when it dies


class CupyStorage(OpLabelled):
    """The cuda backend's ``allocator`` while the pool is on: CuPy already allocates through the pool,
    so this only carries the ``current_op`` hook (and adopt stays the identity)."""

    def __init__(self, allocator, xp):
        super().__init__()
        self.allocator = allocator
        self._xp = xp

    def empty(self, shape, dtype):
        return self._xp.empty(shape, dtype)

    def adopt(self, array):
        return array


_installed = None   # while installed: (previous CuPy allocator, ours, per-device cache)


def install(resolve):
    """Route every CuPy allocation through minigrad's pool.

    ``resolve(device_id)`` returns ``(allocator, storage)``: that device's CachingAllocator and the
    object whose ``current_op`` names the cause of allocations (or None). It is asked once per device;
    ``refresh()`` makes it ask again (after ``enable`` swapped an allocator).
    """
    global _installed
    import cupy
    if _installed is not None:
        refresh()
        return
    devices = {}   # device id -> (allocator, storage)
    live = {}      # pointer -> (allocator, block); pointers are unique across devices (unified addressing)

    def malloc_fn(nbytes, device_id):
        entry = devices.get(device_id)
        if entry is None:
            entry = devices[device_id] = resolve(device_id)
        alloc, storage = entry
        block = alloc.malloc(nbytes, None if storage is None else storage.current_op)
        live[block.address] = (alloc, block)
        return block.address

    def free_fn(pointer, device_id):
        alloc, block = live.pop(pointer)
        alloc.free(block)

    ours = cupy.cuda.memory.PythonFunctionAllocator(malloc_fn, free_fn).malloc
    _installed = (cupy.cuda.get_allocator(), ours, devices)
    cupy.cuda.set_allocator(ours)


def refresh():
    """Forget which allocator serves which device (blocks already out still go back where they came from)."""
    if _installed is not None:
        _installed[2].clear()


def uninstall():
    """Give CuPy its previous allocator back (blocks still alive keep returning to our pool)."""
    global _installed
    if _installed is None:
        return
    import cupy
    cupy.cuda.set_allocator(_installed[0])
    _installed = None


def is_installed():
    return _installed is not None
