"""Fixtures for the memory pool tests: fresh allocators, and an invariant checker shared by the tests."""
import pytest

import minigrad.memory as mem
from minigrad.backend import device, get_backend
from minigrad.memory import CachingAllocator, CPUSource, SimulatedSource
from minigrad.memory.allocator import POOLS
from minigrad.memory.storage import NumpyStorage


@pytest.fixture
def sim():
    """An allocator over simulated addresses: the algorithm without real memory (fast, any size)."""
    return CachingAllocator(SimulatedSource(), "sim")


@pytest.fixture
def storage():
    """NumPy storage over a fresh CPU allocator with real arenas, not installed on the backend."""
    return NumpyStorage(CachingAllocator(CPUSource(), "cpu"))


@pytest.fixture
def fresh_cpu_pool():
    """The pool enabled on the cpu backend with a fresh allocator, so global stats start at zero."""
    with mem.enabled("cpu", allocator=CachingAllocator(CPUSource(), "cpu")) as alloc:
        yield alloc


@pytest.fixture(autouse=True)
def _restore_global_state():
    """Every test leaves the cpu backend without a pool, history off and no memory limit."""
    yield
    alloc = mem.get_allocator("cpu")
    alloc.history = None
    alloc.memory_limit = None
    mem.disable("cpu")
    assert get_backend(device("cpu")).allocator is None


def check_invariants(alloc):
    """Everything a correct caching allocator guarantees, checked from its data structures."""
    live_sizes = {p: 0 for p in POOLS}
    live_requested = {p: 0 for p in POOLS}
    live_count = {p: 0 for p in POOLS}
    reserved = {p: 0 for p in POOLS}
    free_expected = {p: [] for p in POOLS}
    ranges = []
    for seg in alloc.segments.values():
        reserved[seg.pool] += seg.size
        ranges.append((seg.address, seg.address + seg.size))
        blocks = list(seg.blocks())
        assert blocks[0].offset == 0 and blocks[0].prev is None
        end = 0
        for prev, b in zip([None] + blocks[:-1], blocks):
            assert b.segment is seg and b.prev is prev
            assert b.offset == end, "blocks must tile the segment: no gap, no overlap"
            assert b.address == seg.address + b.offset
            assert b.size > 0 and b.size % 512 == 0
            end += b.size
            if prev is not None:
                assert prev.next is b
                assert prev.allocated or b.allocated, "two adjacent free blocks were not coalesced"
            if b.allocated:
                live_sizes[seg.pool] += b.size
                live_requested[seg.pool] += b.requested
                live_count[seg.pool] += 1
                assert b.requested <= b.size
            else:
                free_expected[seg.pool].append((b.size, seg.id, b.offset, b))
        assert end == seg.size, "every byte of the segment belongs to exactly one block"
    ranges.sort()
    for (_, end), (start, _) in zip(ranges, ranges[1:]):
        assert end <= start, "segments overlap"
    for p in POOLS:
        free = alloc.free_blocks[p]
        assert free == sorted(free, key=lambda e: e[:3]), "free list must stay sorted"
        assert sorted(free, key=lambda e: e[:3]) == sorted(free_expected[p], key=lambda e: e[:3])
        stats = alloc.stats[p]
        assert stats.allocated_bytes.current == live_sizes[p]
        assert stats.requested_bytes.current == live_requested[p]
        assert stats.allocation.current == live_count[p]
        assert stats.reserved_bytes.current == reserved[p]
        assert stats.segment.current == sum(1 for s in alloc.segments.values() if s.pool == p)
    total = alloc.stats["all"]
    assert total.allocated_bytes.current == sum(live_sizes.values())
    assert total.requested_bytes.current == sum(live_requested.values())
    assert total.allocation.current == sum(live_count.values())
    assert total.reserved_bytes.current == sum(reserved.values())
    assert total.allocated_bytes.peak >= total.allocated_bytes.current
    assert total.reserved_bytes.peak >= total.reserved_bytes.current
    if alloc.memory_limit is not None:
        assert total.reserved_bytes.current <= alloc.memory_limit


@pytest.fixture
def invariants():
    return check_invariants
