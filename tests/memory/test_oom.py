"""Out of memory: the limit, the retry after empty_cache, and the error the user sees."""
import numpy as np
import pytest

import minigrad.memory as mem
from minigrad import errors
from minigrad.backend import device, get_backend
from minigrad.memory import CachingAllocator, CPUSource, MiB, SimulatedSource


def test_out_of_memory_error_is_minigrads_and_a_runtime_error():
    assert mem.OutOfMemoryError is errors.OutOfMemoryError
    assert issubclass(mem.OutOfMemoryError, RuntimeError)
    assert issubclass(mem.OutOfMemoryError, errors.MinigradError)


def test_limit_retry_after_empty_cache_then_oom(sim, invariants):
    sim.memory_limit = 21 * MiB
    sim.free(sim.malloc(512))                 # a cached, entirely free 2 MiB small segment
    big = sim.malloc(5 * MiB)                 # 2 + 20 > 21: drop the cache, retry, succeed
    assert sim.num_alloc_retries == 1 and sim.num_ooms == 0
    assert sim.reserved_bytes() == 20 * MiB and sim.num_device_free == 1
    rest = sim.malloc(15 * MiB)               # the 15 MiB tail of the 20 MiB segment: no new segment
    assert rest.segment is big.segment
    with pytest.raises(mem.OutOfMemoryError) as info:
        sim.malloc(100)                       # needs a 2 MiB segment; nothing left to release
    assert sim.num_alloc_retries == 2 and sim.num_ooms == 1
    message = str(info.value)
    assert "sim: out of memory allocating 100 B" in message
    assert "memory limit 21 MiB" in message and "20 MiB reserved" in message
    assert "memory summary" in message and "Allocated memory" in message     # the summary table
    invariants(sim)                           # a failed malloc changes nothing
    assert sim.allocated_bytes() == 20 * MiB
    sim.memory_limit = None
    assert sim.malloc(100).size == 512


def test_source_exhaustion_is_oom_without_a_limit(invariants):
    alloc = CachingAllocator(SimulatedSource(capacity=4 * MiB), "gpu-sim")
    blocks = [alloc.malloc(MiB) for _ in range(4)]    # two 2 MiB small segments, full
    with pytest.raises(mem.OutOfMemoryError, match="gpu-sim: out of memory"):
        alloc.malloc(MiB)
    assert alloc.num_ooms == 1 and alloc.num_alloc_retries == 1
    alloc.free(blocks[0])
    assert alloc.malloc(MiB).address == blocks[0].address     # the freed block is reused
    invariants(alloc)


def test_memory_stats_count_retries_and_ooms(fresh_cpu_pool):
    mem.set_memory_limit(3 * MiB)
    assert mem.get_memory_limit() == 3 * MiB
    be = get_backend(device("cpu"))
    x = be.empty((1000,), np.float32)         # 2 MiB small segment
    with pytest.raises(errors.OutOfMemoryError):
        be.empty((512, 1024), np.float32)     # 2 MiB: large pool, 20 MiB segment > 3 MiB
    stats = mem.memory_stats()
    assert stats["num_alloc_retries"] == 1 and stats["num_ooms"] == 1
    assert stats["memory_limit"] == 3 * MiB
    assert mem.memory_reserved() == 2 * MiB   # the live small segment could not be released
    del x
    mem.set_memory_limit(None)
    y = be.empty((512, 1024), np.float32)
    assert y.shape == (512, 1024) and mem.memory_reserved() == 22 * MiB


def test_simulated_8gb_card_on_any_machine():
    """A lesson's scenario: activations of growing batch sizes until the simulated card is full."""
    alloc = CachingAllocator(SimulatedSource(), "cuda-sim")
    alloc.memory_limit = 8 * 2**30
    live, batch = [], 0
    with pytest.raises(mem.OutOfMemoryError):
        while True:
            batch += 64
            live.append(alloc.malloc(batch * 4096 * 4 * 24))     # a (batch, 4096) float32 x 24 layers
    assert alloc.reserved_bytes() <= 8 * 2**30
    assert alloc.reserved_bytes() > 7 * 2**30                   # the card really was nearly full
    assert alloc.num_ooms == 1


def test_cpu_source_capacity_gives_oom_with_real_arenas(invariants):
    alloc = CachingAllocator(CPUSource(capacity=4 * MiB), "cpu")
    a = alloc.malloc(MiB)
    b = alloc.malloc(MiB)
    c = alloc.malloc(MiB)                     # second 2 MiB arena
    with pytest.raises(errors.OutOfMemoryError):
        alloc.malloc(2 * MiB)                 # large pool needs 20 MiB
    assert alloc.source.in_use == 4 * MiB
    for blk in (a, b, c):
        alloc.free(blk)
    alloc.empty_cache()
    assert alloc.source.in_use == 0
    invariants(alloc)


def test_retry_first_finishes_frees_queued_by_finalizers(sim, invariants):
    """A block freed by a finalizer during malloc waits in a queue; before declaring OOM the retry
    completes those frees, and a block freed that way can serve the request."""
    sim.memory_limit = 2 * MiB
    a = sim.malloc(MiB)
    b = sim.malloc(MiB)                       # the only segment is full, and the limit is reached
    sim._busy = True                          # as if a garbage collection ran inside malloc...
    sim.free(a)                               # ...and a's last array died there: queued, not done
    sim._busy = False
    assert sim._deferred == [a] and a.allocated
    c = sim.malloc(MiB)
    assert c.address == a.address and sim.num_alloc_retries == 1 and sim.num_ooms == 0
    assert sim._deferred == []
    sim.free(b)
    sim.free(c)
    invariants(sim)
