"""The caching allocator's algorithm: rounding, pools, best fit, splitting, coalescing, empty_cache."""
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from minigrad.memory import CachingAllocator, MiB, SimulatedSource, round_size, segment_size
from minigrad.memory.allocator import pool_of, should_split

KiB = 1024


@pytest.mark.parametrize("request_bytes, rounded", [(0, 512), (1, 512), (511, 512), (512, 512),
                                                     (513, 1024), (1000, 1024), (MiB, MiB),
                                                     (MiB + 1, MiB + 512)])
def test_round_size_is_a_multiple_of_512(request_bytes, rounded):
    assert round_size(request_bytes) == rounded


@pytest.mark.parametrize("size, pool, seg, block", [
    (512, "small_pool", 2 * MiB, 512),
    (MiB, "small_pool", 2 * MiB, MiB),                      # 1 MiB is still small
    (MiB + 512, "large_pool", 20 * MiB, MiB + 512),
    (10 * MiB - 512, "large_pool", 20 * MiB, 10 * MiB - 512),  # below 10 MiB: shared 20 MiB segments
    (10 * MiB, "large_pool", 10 * MiB, 10 * MiB),           # from 10 MiB: own segment, rounded to 2 MiB
    (11 * MiB, "large_pool", 12 * MiB, 12 * MiB),           # 1 MiB left: too small to split off
    (12 * MiB + 512, "large_pool", 14 * MiB, 12 * MiB + 512),
])
def test_pools_and_segment_sizes_follow_pytorch(sim, size, pool, seg, block):
    assert pool_of(size) == pool and segment_size(size) == seg
    got = sim.malloc(size)
    assert got.segment.pool == pool and got.segment.size == seg and got.size == block
    assert sim.allocated_bytes() == block and sim.reserved_bytes() == seg
    assert sim.stats[pool].allocated_bytes.current == block and sim.stats[pool].segment.current == 1


def test_small_requests_share_one_segment(sim):
    blocks = [sim.malloc(1000) for _ in range(100)]
    assert len(sim.segments) == 1 and sim.num_device_alloc == 1
    addresses = [b.address for b in blocks]
    assert addresses == sorted(addresses)
    assert all(b2 - b1 == 1024 for b1, b2 in zip(addresses, addresses[1:]))   # packed, 1024 apart


def test_freed_block_is_reused_at_the_same_address(sim, invariants):
    a = sim.malloc(3000)
    keep = sim.malloc(100)
    address = a.address
    sim.free(a)
    b = sim.malloc(2900)                      # rounds to the same 3072 bytes
    assert b.address == address
    assert sim.num_device_alloc == 1 and sim.reserved_bytes() == 2 * MiB
    sim.free(b)
    sim.free(keep)
    invariants(sim)


def test_best_fit_takes_the_smallest_block_that_fits(sim, invariants):
    # free blocks of 3 KiB, 1 KiB and 2 KiB, kept apart by live 512 B spacers, then the segment's tail
    a, s1, b, s2, c, s3 = (sim.malloc(n) for n in (3 * KiB, 512, KiB, 512, 2 * KiB, 512))
    for blk in (a, b, c):
        sim.free(blk)
    invariants(sim)
    got = sim.malloc(1536)                    # fits 3 KiB, 2 KiB and the tail; smallest is 2 KiB
    assert got.address == c.address
    assert got.size == 1536 and got.next.size == 512 and not got.next.allocated   # split off the rest
    got2 = sim.malloc(KiB)                    # exactly the 1 KiB block
    assert got2.address == b.address and got2.size == KiB
    got3 = sim.malloc(2 * KiB + 512)          # only the 3 KiB block (and the tail) fit
    assert got3.address == a.address
    invariants(sim)


def test_ties_in_size_go_to_the_lowest_offset(sim):
    a, s1, b, s2 = (sim.malloc(n) for n in (KiB, 512, KiB, 512))
    sim.free(b)
    sim.free(a)
    assert sim.malloc(KiB).address == a.address


def test_small_pool_splits_every_remainder(sim):
    a = sim.malloc(KiB)
    spacer = sim.malloc(512)
    sim.free(a)
    got = sim.malloc(512)                     # 512 B left over: >= 512, so split
    assert should_split("small_pool", 512) and not should_split("small_pool", 0)
    assert got.size == 512 and got.next.size == 512 and not got.next.allocated
    assert got.next.next is spacer
    assert sim.allocated_bytes() == 1024      # 512 + the spacer


def test_large_pool_keeps_remainders_of_at_most_1_mib(sim, invariants):
    a = sim.malloc(3 * MiB)                   # 20 MiB segment: a | 17 MiB free
    b = sim.malloc(2 * MiB)                   # a | b | 15 MiB free
    sim.free(a)                               # 3 MiB free | b | 15 MiB free
    got = sim.malloc(2 * MiB + 512 * KiB)     # best fit 3 MiB; remainder 0.5 MiB <= 1 MiB: not split
    assert not should_split("large_pool", 512 * KiB) and not should_split("large_pool", MiB)
    assert got.address == a.address and got.size == 3 * MiB and got.requested == 2 * MiB + 512 * KiB
    assert sim.allocated_bytes() == 5 * MiB   # allocated counts the whole 3 MiB block (as PyTorch)
    assert sim.stats["all"].requested_bytes.current == 4 * MiB + 512 * KiB
    invariants(sim)
    sim.free(got)
    got = sim.malloc(MiB + 512 * KiB)         # remainder 1.5 MiB > 1 MiB: split
    assert should_split("large_pool", MiB + 512)
    assert got.size == MiB + 512 * KiB and got.next.size == MiB + 512 * KiB and not got.next.allocated
    sim.free(got)
    sim.free(b)
    invariants(sim)


def test_free_coalesces_neighbours_back_into_one_segment(sim, invariants):
    blocks = [sim.malloc(KiB) for _ in range(3)]
    seg = blocks[0].segment
    for i in (1, 0, 2):                       # middle, then left (merges), then right (merges both)
        sim.free(blocks[i])
        invariants(sim)
    assert [b.size for b in seg.blocks()] == [seg.size]
    assert sim.free_blocks["small_pool"] == [(seg.size, seg.id, 0, seg.first)]
    assert seg.is_free()


def test_empty_cache_releases_only_entirely_free_segments(sim, invariants):
    keep = sim.malloc(5 * MiB)                # 20 MiB segment, partly used (15 MiB free tail)
    gone_small = sim.malloc(KiB)
    gone_large = sim.malloc(16 * MiB)         # does not fit the tail: a 16 MiB segment of its own
    sim.free(gone_small)
    sim.free(gone_large)
    assert sim.reserved_bytes() == (20 + 2 + 16) * MiB
    released = sim.empty_cache()
    assert released == 18 * MiB
    assert sim.reserved_bytes() == 20 * MiB and sim.num_device_free == 2
    assert sim.source.in_use == 20 * MiB      # the source got the memory back
    invariants(sim)
    sim.free(keep)
    assert sim.empty_cache() == 20 * MiB and sim.reserved_bytes() == 0 and sim.segments == {}


def test_double_free_is_an_error(sim):
    a = sim.malloc(KiB)
    sim.free(a)
    with pytest.raises(RuntimeError, match="double free"):
        sim.free(a)


def test_stat_peaks_and_cumulative_counts(sim):
    a = sim.malloc(KiB)
    b = sim.malloc(2 * KiB)
    sim.free(a)
    c = sim.malloc(512)
    stat = sim.stats["all"].allocated_bytes
    assert (stat.current, stat.peak, stat.allocated, stat.freed) == (2560, 3072, 3584, 1024)
    sim.reset_peak_stats()
    assert stat.peak == 2560
    sim.reset_accumulated_stats()
    assert (stat.allocated, stat.freed) == (0, 0)
    sim.free(b)
    sim.free(c)
    assert stat.current == 0 and stat.freed == 2560


# --- random sequences ---------------------------------------------------------------------------------
sizes = st.one_of(st.integers(1, 4 * KiB), st.integers(1, MiB + 4096), st.integers(MiB, 12 * MiB),
                  st.integers(9 * MiB, 24 * MiB))
actions = st.lists(st.one_of(st.tuples(st.just("malloc"), sizes),
                             st.tuples(st.just("free"), st.integers(0, 10**6)),
                             st.tuples(st.just("empty_cache"), st.just(0))), max_size=80)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(actions=actions, limit=st.one_of(st.none(), st.integers(20, 120).map(lambda m: m * MiB)))
def test_random_alloc_free_sequences_keep_every_invariant(invariants, actions, limit):
    check_invariants = invariants       # a pure function: safe to share between examples
    alloc = CachingAllocator(SimulatedSource(), "sim")
    alloc.memory_limit = limit
    live = []
    ooms = 0
    for action, arg in actions:
        if action == "malloc":
            try:
                block = alloc.malloc(arg)
            except MemoryError:
                pytest.fail("OutOfMemoryError must not be a MemoryError subclass")
            except RuntimeError as e:
                assert "out of memory" in str(e)
                ooms += 1
                continue
            assert block.size >= arg and block.requested == arg
            live.append(block)
        elif action == "free" and live:
            alloc.free(live.pop(arg % len(live)))
        elif action == "empty_cache":
            alloc.empty_cache()
        check_invariants(alloc)
        # live blocks never overlap, even across segments
        spans = sorted((b.address, b.address + b.size) for b in live)
        assert all(e1 <= s2 for (_, e1), (s2, _) in zip(spans, spans[1:]))
        assert alloc.allocated_bytes() == sum(b.size for b in live)
    assert alloc.num_ooms == ooms
    for block in live:
        alloc.free(block)
    check_invariants(alloc)
    for seg in alloc.segments.values():       # coalescing restored every segment to one free block
        assert [(b.offset, b.size, b.allocated) for b in seg.blocks()] == [(0, seg.size, False)]
    alloc.empty_cache()
    assert alloc.reserved_bytes() == 0 and alloc.source.in_use == 0
    assert alloc.num_device_alloc == alloc.num_device_free
