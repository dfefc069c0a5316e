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


class CupyStorage:
    """The cuda backend's ``allocator`` while the pool is on: CuPy already allocates through the pool,
    so this only carries the ``current_op`` hook (and adopt stays the identity)."""

    def __init__(self, allocator, xp):
        self.allocator = allocator
        self.current_op = None
        self._xp = xp

    def empty(self, shape, dtype):
        return self._xp.empty(shape, dtype)

    def adopt(self, array):
        return array


_installed = None   # (previous CuPy allocator, our allocator function) while installed


def install(allocator_for, cause_for):
    """Route every CuPy allocation through minigrad's pool.

    ``allocator_for(device_id)`` returns that device's CachingAllocator; ``cause_for(device_id)`` the op
    to record as the cause (the storage adapter's ``current_op``).
    """
    global _installed
    import cupy
    if _installed is not None:
        return
    live = {}   # (device id, pointer) -> Block

    def malloc_fn(nbytes, device_id):
        block = allocator_for(device_id).malloc(nbytes, cause_for(device_id))
        live[device_id, block.address] = block
        return block.address

    def free_fn(pointer, device_id):
        allocator_for(device_id).free(live.pop((device_id, pointer)))

    ours = cupy.cuda.memory.PythonFunctionAllocator(malloc_fn, free_fn).malloc
    _installed = (cupy.cuda.get_allocator(), ours)
    cupy.cuda.set_allocator(ours)


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
