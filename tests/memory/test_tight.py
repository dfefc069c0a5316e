"""The pool's tight mode (set_memory_limit(..., tight=True)): segments of just the block, reuse of a cached
block only at its exact size, NumPy's results borrowed instead of copied -- so that reserved bytes stay
with the allocated ones and a training run fits a budget."""
import numpy as np
import pytest

import minigrad as mg
import minigrad.memory as mem
from minigrad.memory import MiB
from tests.memory.conftest import check_invariants


def test_tight_segments_are_just_the_block_and_reuse_needs_the_exact_size(sim):
    sim.tight = True
    a = sim.malloc(5 * MiB + 100)                  # rounded to 512 B, not to a 20 MiB segment
    assert a.segment.size == a.size == 5 * MiB + 512 and sim.reserved_bytes() == 5 * MiB + 512
    b = sim.malloc(3000)                          # small pool: 3072 B, not a 2 MiB segment
    assert sim.reserved_bytes() == 5 * MiB + 512 + 3072
    sim.free(a)
    c = sim.malloc(MiB + 1024)                    # the cached 5 MiB block is not split for it
    assert c.segment is not a.segment and sim.reserved_bytes() == 5 * MiB + 512 + 3072 + MiB + 1024
    sim.free(c)
    d = sim.malloc(MiB + 1000)                    # the same rounded size: the cached block again
    assert d.segment is c.segment
    check_invariants(sim)
    del b


def test_tight_oom_retry_releases_every_free_block(sim):
    sim.tight, sim.memory_limit = True, 10 * MiB
    blocks = [sim.malloc(MiB) for _ in range(8)]
    for blk in blocks[::2]:
        sim.free(blk)                              # 4 MiB cached in 4 segments, between live ones
    big = sim.malloc(5 * MiB)                      # 4 + 4 + 5 > 10: release the cache, retry: fits
    assert sim.num_alloc_retries == 1 and sim.reserved_bytes() == sim.allocated_bytes() == 9 * MiB
    with pytest.raises(mem.OutOfMemoryError, match="new segment of 2 MiB"):
        sim.malloc(2 * MiB)
    check_invariants(sim)
    del big


def test_borrowed_memory_is_a_segment_of_its_own_released_on_free(sim):
    sim.memory_limit = 4 * MiB
    blk = sim.borrow(3 * MiB + 5, address=1 << 40, handle="theirs")
    assert blk.address == 1 << 40 and blk.segment.borrowed and blk.requested == 3 * MiB + 5
    assert sim.reserved_bytes() == sim.allocated_bytes() == 3 * MiB + 512
    with pytest.raises(mem.OutOfMemoryError):
        sim.borrow(MiB, address=1 << 41, handle=None)          # over the limit
    sim.free(blk)
    assert sim.reserved_bytes() == 0 and not sim.segments and sim.source.in_use == 0


def test_a_tight_cpu_pool_borrows_op_results_without_a_copy(fresh_cpu_pool):
    mem.set_memory_limit(64 * MiB, tight=True)
    x = mg.randn(512, 512)
    y = x @ x                                                   # NumPy's array, taken over
    seg = mem.block_of(y.array).segment
    assert seg.borrowed and seg.size == 512 * 512 * 4
    assert mem.memory_reserved() == mem.memory_allocated() == 2 * 512 * 512 * 4
    np.testing.assert_allclose(y.numpy(), x.numpy() @ x.numpy(), rtol=1e-5)
    del y
    assert mem.memory_reserved() == 512 * 512 * 4               # released with its last view
    mem.set_memory_limit(None)                                  # not tight: results copied into blocks
    z = x * 2
    assert not mem.block_of(z.array).segment.borrowed and mem.memory_reserved() > 2 * 512 * 512 * 4
    check_invariants(fresh_cpu_pool)


def test_tight_history_marks_borrowed_allocations(fresh_cpu_pool):
    mem.set_memory_limit(None, tight=True)
    mem.record_memory_history(True)
    x = mg.ones(100)
    y = x + 1
    ev = [e for e in mem.snapshot()["events"] if e["action"] == "alloc"]
    assert [e["borrowed"] for e in ev] == [False, True] and ev[1]["op"] == "add"
    del x, y
