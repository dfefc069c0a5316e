"""The CuPy glue: segments from cudaMalloc and the PythonFunctionAllocator hook.

Without a GPU the glue runs against a fake ``cupy`` module that behaves like the real one where it
matters (``Memory`` frees on deletion, ``PythonFunctionAllocator`` calls ``malloc(nbytes, device_id)`` and
``free(pointer, device_id)``, cudaMalloc failures raise ``CUDARuntimeError`` with status 2). The last test
runs the real thing on a GPU machine.
"""
import sys
import types

import pytest

import minigrad.memory as mem
from cupy_calls import api  # tests/cupy_calls.py: records the calls for the real-CuPy check
from minigrad.memory import CachingAllocator, MiB, cupy_pool


class FakeCUDARuntimeError(RuntimeError):
    def __init__(self, status):
        super().__init__(f"cudaError {status}")
        self.status = status


class FakeGPU:
    capacity = 64 * MiB
    in_use = 0
    next_ptr = 1 << 40
    fail_status = 2


@api("cupy.cuda.Memory")
class FakeMemory:
    """cupy.cuda.Memory: cudaMalloc on construction, cudaFree when it dies."""

    def __init__(self, size):
        self.size = 0
        if FakeGPU.in_use + size > FakeGPU.capacity:
            raise FakeCUDARuntimeError(FakeGPU.fail_status)
        FakeGPU.in_use += size
        self.size, self.ptr = size, FakeGPU.next_ptr
        FakeGPU.next_ptr += size + 4096

    def __del__(self):
        FakeGPU.in_use -= self.size


class FakePointer:
    def __init__(self, owner, size, device_id):
        self.owner, self.device_id, self.ptr = owner, device_id, 0
        self.ptr = owner.malloc_func(size, device_id) if size > 0 else 0

    def __del__(self):
        if self.ptr:
            self.owner.free_func(self.ptr, self.device_id)


@api("cupy.cuda.memory.PythonFunctionAllocator")
class FakePythonFunctionAllocator:
    def __init__(self, malloc_func, free_func):
        self.malloc_func, self.free_func = malloc_func, free_func

    def malloc(self, size):
        return FakePointer(self, size, fake_cupy.cuda.current_device)


@api("cupy.cuda.Device")
class FakeDevice:
    def __init__(self, i):
        self.i = i

    def __enter__(self):
        self.prev, fake_cupy.cuda.current_device = fake_cupy.cuda.current_device, self.i

    def __exit__(self, *exc):
        fake_cupy.cuda.current_device = self.prev


def _default_allocator(size):
    return ("cupy's own pool", size)


fake_cupy = types.ModuleType("cupy")
fake_cupy.cuda = types.SimpleNamespace(
    Memory=FakeMemory, Device=FakeDevice, current_device=0,
    runtime=types.SimpleNamespace(CUDARuntimeError=FakeCUDARuntimeError),
    memory=types.SimpleNamespace(PythonFunctionAllocator=FakePythonFunctionAllocator),
    _allocator=_default_allocator)
fake_cupy.cuda.get_allocator = api("cupy.cuda.get_allocator")(lambda: fake_cupy.cuda._allocator)
fake_cupy.cuda.set_allocator = api("cupy.cuda.set_allocator")(
    lambda f: setattr(fake_cupy.cuda, "_allocator", f))
fake_cupy.empty = api("cupy.empty")(lambda shape, dtype: ("cupy array", shape, dtype))


@pytest.fixture
def cupy(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    FakeGPU.in_use, FakeGPU.fail_status = 0, 2
    fake_cupy.cuda._allocator = _default_allocator
    yield fake_cupy
    cupy_pool.uninstall()
    assert fake_cupy.cuda._allocator is _default_allocator


def test_cupy_source_gives_cudamalloc_segments_and_none_when_full(cupy):
    source = cupy_pool.CupySource(0)
    address, handle = source.allocate(2 * MiB)
    assert address == handle.ptr and FakeGPU.in_use == 2 * MiB
    assert source.allocate(100 * MiB) is None               # cudaErrorMemoryAllocation: "device full"
    FakeGPU.fail_status = 700                               # any other CUDA error is a real error
    with pytest.raises(FakeCUDARuntimeError):
        source.allocate(100 * MiB)
    source.release(handle)
    del handle
    assert FakeGPU.in_use == 0                              # dropping the handle is cudaFree


def test_installed_pool_serves_every_cupy_allocation(cupy, invariants):
    allocators = {i: CachingAllocator(cupy_pool.CupySource(i), f"cuda:{i}") for i in (0, 1)}
    ops = {0: types.SimpleNamespace(current_op="matmul"), 1: None}
    cupy_pool.install(lambda i: (allocators[i], ops[i]))
    assert cupy_pool.is_installed()
    cupy_malloc = cupy.cuda.get_allocator()                 # what CuPy now calls for every array
    p = cupy_malloc(1000)
    block = next(b for s in allocators[0].segments.values() for b in s.blocks() if b.allocated)
    assert p.ptr == block.address and block.size == 1024 and block.cause == "matmul"
    assert allocators[0].allocated_bytes() == 1024 and FakeGPU.in_use == 2 * MiB
    address = p.ptr
    del p                                                   # CuPy drops the memory: back to our pool
    assert allocators[0].allocated_bytes() == 0
    q = cupy_malloc(900)
    assert q.ptr == address                                 # cached block reused, no new cudaMalloc
    with FakeDevice(1):
        r = cupy_malloc(3 * MiB)
    assert allocators[1].allocated_bytes() == 3 * MiB and allocators[0].allocated_bytes() == 1024
    del q, r
    for a in allocators.values():
        invariants(a)
        a.empty_cache()
    assert FakeGPU.in_use == 0
    cupy_pool.uninstall()
    assert cupy.cuda.get_allocator() is _default_allocator and not cupy_pool.is_installed()


def test_oom_on_the_gpu_raises_minigrads_error_through_cupy(cupy):
    alloc = CachingAllocator(cupy_pool.CupySource(0), "cuda:0")
    alloc.memory_limit = 8 * MiB
    cupy_pool.install(lambda i: (alloc, None))
    cupy_malloc = cupy.cuda.get_allocator()
    with pytest.raises(mem.OutOfMemoryError, match="cuda:0: out of memory"):
        cupy_malloc(9 * MiB)
    assert alloc.num_ooms == 1


def test_enable_cuda_installs_hook_and_adapter(cupy, monkeypatch):
    backend = types.SimpleNamespace(allocator=None, xp=cupy)
    monkeypatch.setattr(mem.pools, "get_backend", lambda dev: backend)
    alloc = CachingAllocator(cupy_pool.CupySource(0), "cuda:0")
    monkeypatch.setitem(mem.pools._ALLOCATORS, "cuda:0", alloc)
    mem.enable("cuda:0")
    storage = backend.allocator
    assert isinstance(storage, cupy_pool.CupyStorage) and cupy_pool.is_installed()
    assert storage.empty((2, 3), "f4") == ("cupy array", (2, 3), "f4")
    assert storage.adopt("x") == "x"                        # CuPy already allocated it from the pool
    storage.current_op = "gelu"
    p = cupy.cuda.get_allocator()(4096)
    assert alloc.segments[0].first.cause == "gelu" and mem.memory_allocated("cuda:0") == 4096
    replacement = CachingAllocator(cupy_pool.CupySource(0), "cuda:0")
    mem.enable("cuda:0", allocator=replacement)            # e.g. a student's allocator
    q = cupy.cuda.get_allocator()(4096)
    assert replacement.allocated_bytes() == 4096 and alloc.allocated_bytes() == 4096
    del p                                                   # goes back to the allocator it came from
    assert alloc.allocated_bytes() == 0 and replacement.allocated_bytes() == 4096
    del q
    assert replacement.allocated_bytes() == 0
    mem.disable("cuda:0")
    assert backend.allocator is None and not cupy_pool.is_installed()
    assert mem.memory_reserved("cuda:0") == 0               # disable emptied the cache
    alloc.empty_cache()
    assert FakeGPU.in_use == 0


@pytest.mark.gpu
def test_real_cupy_allocates_through_the_pool():
    cp = pytest.importorskip("cupy")
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA device")
    except Exception as e:                                  # cupy without a driver
        pytest.skip(f"no usable CUDA device: {e}")
    alloc = CachingAllocator(cupy_pool.CupySource(0), "cuda:0")
    cupy_pool.install(lambda i: (alloc, types.SimpleNamespace(current_op="test")))
    try:
        x = cp.arange(1000, dtype=cp.float32)
        assert alloc.allocated_bytes() >= 4096 and alloc.reserved_bytes() == 2 * MiB
        y = (x * 2).sum()
        assert float(y) == 999000.0
        address = x.array.ptr
        del x, y
        cp.cuda.Device(0).synchronize()
        assert alloc.allocated_bytes() == 0
        z = cp.empty(1000, dtype=cp.float32)
        assert z.array.ptr == address                        # the cached block comes back
        del z
    finally:
        cupy_pool.uninstall()
        alloc.empty_cache()
    assert alloc.reserved_bytes() == 0
