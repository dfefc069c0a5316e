"""CPU storage: NumPy arrays viewing pool blocks, returned exactly when the last view dies."""
import gc
import random
import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import minigrad.memory as mem
from minigrad.backend import device, dtypes, get_backend
from minigrad.memory import MiB, block_of, round_size, views_pool_block
from minigrad.memory.storage import NumpyStorage


def test_empty_gives_an_array_viewing_a_pool_block(storage):
    a = storage.empty((3, 5), np.float32)
    assert a.shape == (3, 5) and a.dtype == np.float32 and a.flags.c_contiguous and a.flags.writeable
    block = block_of(a)
    assert block is not None and block.allocated and block.requested == 60
    assert a.__array_interface__["data"][0] == block.address
    assert storage.allocator.allocated_bytes() == 512


@pytest.mark.parametrize("dt", dtypes.ALL, ids=lambda d: d.name)
def test_every_minigrad_dtype_lives_in_the_pool(storage, dt):
    a = storage.empty((7, 3), dt.np_dtype)
    assert a.dtype == dt.np_dtype and views_pool_block(a)
    a[...] = 1
    assert (a == 1).all()


def test_shapes_scalars_ints_and_zero_size(storage):
    assert storage.empty((), np.float64).shape == ()
    assert storage.empty(4, np.int64).shape == (4,)
    assert storage.empty([2, np.int64(3)], np.float32).shape == (2, 3)
    assert storage.allocator.allocated_bytes() == 0       # all dead already
    z = storage.empty((0, 5), np.float32)
    assert z.shape == (0, 5) and not views_pool_block(z)  # zero bytes need no block
    assert storage.allocator.stats["all"].allocation.allocated == 3


def test_views_keep_the_block_alive_until_the_last_one_dies(storage):
    alloc = storage.allocator
    a = storage.empty((4, 6), np.float64)
    a[...] = np.arange(24).reshape(4, 6)
    views = [a[1:], a.T, a.reshape(24), a[::2, ::3], a[1:][1:].T, a.view(np.int64), a[None],
             np.broadcast_to(a[:1], (3, 6)), np.expand_dims(a, 0).squeeze(), a.ravel()]
    assert all(views_pool_block(v) for v in views)
    block = block_of(a)
    del a
    gc.collect()
    for i in range(len(views)):
        assert block.allocated and alloc.allocated_bytes() == 512, f"freed with {len(views) - i} views"
        assert views[-1][0] == 0.0
        views.pop(0)
    assert not block.allocated and alloc.allocated_bytes() == 0


def test_a_view_of_a_slice_outlives_both(storage):
    """The trap NumPy's .base collapsing sets: a finalizer on an intermediate slice would fire here."""
    alloc = storage.allocator
    a = storage.empty((10,), np.float32)
    a[:] = np.arange(10)
    s = a[2:]
    v = s[::2]
    del a, s
    assert alloc.allocated_bytes() == 512
    np.testing.assert_array_equal(v, [2, 4, 6, 8])
    del v
    assert alloc.allocated_bytes() == 0


def test_adopt_copies_fresh_arrays_into_the_pool(storage):
    x = np.arange(12.0).reshape(3, 4).T       # not contiguous, not pool
    y = storage.adopt(x)
    assert y is not x and views_pool_block(y)
    np.testing.assert_array_equal(y, x)
    assert storage.allocator.stats["all"].requested_bytes.current == x.nbytes


def test_adopt_keeps_arrays_that_already_view_the_pool(storage):
    a = storage.empty((4, 4), np.float32)
    for v in (a, a.T, a[1:, ::2], a.reshape(16)):
        assert storage.adopt(v) is v          # views stay views: in-place changes stay shared
    assert storage.allocator.stats["all"].allocation.allocated == 1


def test_adopt_leaves_unpoolable_arrays_alone(storage):
    for x in (np.zeros((0, 3)), np.array([object(), None], dtype=object), np.float64(3.0)):
        assert storage.adopt(x) is x
    assert storage.allocator.stats["all"].allocation.allocated == 0


def test_enable_installs_the_pool_on_the_cpu_backend(fresh_cpu_pool):
    be = get_backend(device("cpu"))
    assert mem.is_enabled() and isinstance(be.allocator, NumpyStorage)
    assert be.allocator.allocator is fresh_cpu_pool is mem.get_allocator()
    x = be.empty((100,), np.float32)
    y = be.adopt(np.ones(300))
    assert views_pool_block(x) and views_pool_block(y)
    assert mem.memory_allocated() == 512 + 2560 and mem.memory_requested() == 400 + 2400
    mem.disable()
    assert be.allocator is None and not mem.is_enabled()
    z = be.empty((100,), np.float32)
    assert not views_pool_block(z) and be.adopt(z) is z
    del x, y                                  # blocks made before disable still come back
    assert mem.memory_allocated() == 0


def test_enabled_context_restores_the_previous_state():
    be = get_backend(device("cpu"))
    assert be.allocator is None
    with mem.enabled() as alloc:
        assert views_pool_block(be.empty((3,), np.float32))
        assert alloc is mem.get_allocator("cpu")
        with mem.enabled():                   # nested: still on, and still on after the inner block
            pass
        assert mem.is_enabled()
    assert be.allocator is None and not views_pool_block(be.empty((3,), np.float32))


def test_reserved_growth_matches_tracemalloc(storage):
    """NumPy reports its allocations to tracemalloc: an independent count of the arenas we hold."""
    alloc = storage.allocator
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        arrays = [storage.empty((n, 1000), np.float64) for n in (10, 200, 1500, 3000, 10, 20)]
        grown = tracemalloc.get_traced_memory()[0] - before
        reserved = alloc.reserved_bytes()
        assert reserved >= 20 * MiB
        assert reserved <= grown <= reserved + 64 * 1024      # only small Python objects on top
        del arrays
        alloc.empty_cache()
        assert alloc.reserved_bytes() == 0
        assert tracemalloc.get_traced_memory()[0] - before < 64 * 1024     # arenas really went back
    finally:
        tracemalloc.stop()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(st.booleans(), st.integers(0, 40), st.integers(1, 3000),
                                st.sampled_from(["f4", "f8", "i2", "u1", "?"]), st.booleans()),
                      min_size=1, max_size=60))
def test_allocated_equals_live_arrays_and_live_arrays_never_overlap(invariants, steps):
    alloc = mem.CachingAllocator(mem.CPUSource(), "cpu")
    storage = NumpyStorage(alloc)
    live = []                                 # (array, the value it must hold, its root's nbytes)
    for i, (make, pick, n, dt, via_adopt) in enumerate(steps):
        if make or not live:
            if via_adopt:
                root = storage.adopt(np.full(n, i % 2, dtype=dt))
            else:
                root = storage.empty((n,), dt)
            root[...] = i % 2
            view = root[n // 3:] if pick % 3 == 0 else root   # sometimes only a view survives
            live.append((view, i % 2, root.nbytes))
            del root, view
        else:
            live.pop(pick % len(live))
        # each live array still holds its own value: no two live arrays share bytes
        assert all((arr == value).all() for arr, value, _ in live)
        assert alloc.allocated_bytes() == sum(round_size(nbytes) for _, _, nbytes in live)
        invariants(alloc)
    live.clear()
    assert alloc.allocated_bytes() == 0
    invariants(alloc)


def test_allocated_matches_tracemalloc_when_every_tensor_has_its_own_segment(storage):
    """Tensors of whole 2 MiB multiples >= 10 MiB get a segment each: allocated = reserved = what NumPy
    reports to tracemalloc, so memory_allocated itself is checked against an independent count."""
    alloc = storage.allocator
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        arrays = [storage.empty((n, 2**18), np.float32) for n in (10, 12, 16)]   # 10, 12, 16 MiB
        grown = tracemalloc.get_traced_memory()[0] - before
        assert alloc.allocated_bytes() == alloc.reserved_bytes() == 38 * MiB
        assert alloc.allocated_bytes() <= grown <= alloc.allocated_bytes() + 64 * 1024
        del arrays[1]
        assert alloc.allocated_bytes() == 26 * MiB
    finally:
        tracemalloc.stop()


def test_frees_run_by_garbage_collection_in_the_middle_of_malloc(storage, invariants):
    """Autograd graphs are cycles, so arrays often die in a cyclic-GC pass, and such a pass can start
    at any allocation of a Python object, including the ones inside malloc and free themselves."""
    alloc = storage.allocator
    deferred_runs = []
    free_deferred = alloc._free_deferred
    alloc._free_deferred = lambda: (deferred_runs.append(len(alloc._deferred)), free_deferred())
    rng = random.Random(0)
    threshold = gc.get_threshold()
    gc.collect()
    gc.set_threshold(3)                       # a collection every few allocations, wherever they are
    try:
        keep = []
        for i in range(3000):
            a = storage.empty((64 + (i % 7) * 300,), np.float32)
            cycle = [a]
            cycle.append(cycle)               # only the cyclic GC can free this array
            del a, cycle
            junk = [[] for _ in range(rng.randrange(4))]     # shift where the next collection lands
            if i % 3 == 0:
                keep.append(storage.empty((10 + i % 50,), np.float64))
            if i % 5 == 0:
                keep.pop(0)
        del junk
    finally:
        gc.set_threshold(*threshold)
    gc.collect()
    assert len(deferred_runs) > 10            # the situation really arose, many times
    invariants(alloc)
    assert alloc._deferred == []
    assert alloc.allocated_bytes() == sum(round_size(k.nbytes) for k in keep)
    keep.clear()
    assert alloc.allocated_bytes() == 0


def test_enable_twice_keeps_the_adapter_and_a_custom_allocator_is_temporary():
    be = get_backend(device("cpu"))
    default = mem.get_allocator("cpu")
    mem.enable()
    adapter = be.allocator
    adapter.current_op = "conv2d"
    assert mem.enable() is default and be.allocator is adapter and adapter.current_op == "conv2d"
    custom = mem.CachingAllocator(mem.CPUSource(), "cpu")
    with mem.enabled(allocator=custom) as alloc:            # e.g. a student's allocator
        assert alloc is custom and mem.get_allocator() is custom
        x = be.empty((1000,), np.float64)
        assert custom.allocated_bytes() == 8192 and mem.memory_allocated() == 8192
    assert mem.get_allocator() is default and mem.is_enabled()     # was on before: still on
    assert be.allocator.allocator is default
    del x
    assert custom.allocated_bytes() == 0      # the block went back to the allocator it came from
    mem.disable()
    assert not mem.is_enabled()


def test_pool_blocks_are_cache_line_aligned(storage):
    """Every array the CPU pool hands out starts on a 64-byte boundary (NumPy's own: 16)."""
    arrays = [storage.empty((n,), np.float32) for n in (1, 100, 1000, 300_000, 7)]
    assert all(a.__array_interface__["data"][0] % 64 == 0 for a in arrays)
