"""Statistics with PyTorch's names: memory_stats keys, peaks, summary table, fragmentation."""
import numpy as np

import minigrad.memory as mem
from minigrad.backend import device, get_backend
from minigrad.memory import KiB, MiB

REQUIRED_KEYS = [f"{name}.{scope}.{amount}"
                 for name in ("allocated_bytes", "reserved_bytes", "active_bytes", "requested_bytes",
                              "allocation", "segment", "active")
                 for scope in ("all", "small_pool", "large_pool")
                 for amount in ("current", "peak", "allocated", "freed")] + [
    "num_alloc_retries", "num_ooms", "inactive_split_bytes.all.current", "inactive_split.all.current"]


def test_memory_stats_has_pytorchs_keys_and_true_values(fresh_cpu_pool):
    be = get_backend(device("cpu"))
    small = be.empty((250,), np.float32)          # 1000 B -> 1 KiB block, small pool
    large = be.empty((3 * MiB,), np.uint8)        # large pool, 20 MiB segment
    stats = mem.memory_stats()
    assert all(k in stats for k in REQUIRED_KEYS), [k for k in REQUIRED_KEYS if k not in stats]
    assert stats["allocated_bytes.all.current"] == KiB + 3 * MiB
    assert stats["allocated_bytes.small_pool.current"] == KiB
    assert stats["allocated_bytes.large_pool.current"] == 3 * MiB
    assert stats["requested_bytes.all.current"] == 1000 + 3 * MiB
    assert stats["reserved_bytes.all.current"] == 22 * MiB
    assert stats["segment.all.current"] == 2 and stats["allocation.all.current"] == 2
    assert stats["active_bytes.all.current"] == stats["allocated_bytes.all.current"]
    assert stats["num_alloc_retries"] == 0 and stats["num_ooms"] == 0
    del large
    stats = mem.memory_stats()
    assert stats["allocated_bytes.all.current"] == KiB
    assert stats["allocated_bytes.all.peak"] == KiB + 3 * MiB
    assert stats["allocated_bytes.large_pool.freed"] == 3 * MiB
    assert stats["reserved_bytes.all.current"] == 22 * MiB     # cached, not returned
    assert mem.memory_allocated() == KiB and mem.max_memory_allocated() == KiB + 3 * MiB
    assert mem.memory_reserved() == mem.max_memory_reserved() == 22 * MiB
    assert mem.empty_cache() == 20 * MiB
    assert mem.memory_reserved() == 2 * MiB and mem.max_memory_reserved() == 22 * MiB
    mem.reset_peak_memory_stats()
    assert mem.max_memory_allocated() == KiB and mem.max_memory_reserved() == 2 * MiB
    mem.reset_accumulated_memory_stats()
    assert mem.memory_stats()["allocated_bytes.all.allocated"] == 0
    del small
    assert mem.memory_allocated() == 0


def test_device_arguments_all_mean_the_same_cpu(fresh_cpu_pool):
    x = get_backend(device("cpu")).empty((10,), np.float64)
    assert mem.memory_allocated() == mem.memory_allocated("cpu") == mem.memory_allocated(device("cpu")) \
        == 512
    del x


def test_stats_of_a_device_without_a_pool_are_zero_and_never_raise():
    assert mem.memory_allocated("cuda:3") == 0 and mem.max_memory_reserved("cuda:3") == 0


def test_fragmentation_is_one_minus_largest_free_over_free(sim):
    blocks = [sim.malloc(512 * KiB) for _ in range(4)]      # fills one 2 MiB segment exactly
    assert sim.fragmentation() == 0.0                       # nothing cached
    sim.free(blocks[0])
    sim.free(blocks[2])                                     # two 512 KiB holes, not adjacent
    assert sim.fragmentation() == 0.5
    assert sim.inactive_split() == (2, MiB)                 # cached but not releasable
    sim.free(blocks[1])                                     # holes merge into one 1.5 MiB block
    assert sim.fragmentation() == 0.0
    assert sim.inactive_split() == (1, 3 * MiB // 2)
    sim.free(blocks[3])
    assert sim.inactive_split() == (0, 0)                   # one free segment: releasable


def test_memory_summary_is_a_readable_table(fresh_cpu_pool):
    x = get_backend(device("cpu")).empty((3 * MiB // 4,), np.float32)     # 3 MiB, large pool
    text = mem.memory_summary()
    lines = text.splitlines()
    assert "memory summary, device cpu" in text
    assert len({len(line) for line in lines}) == 1          # a rectangular table
    row = next(line for line in lines if line.startswith("| Allocated memory"))
    assert row.split()[3:5] == ["3", "MiB"]                 # current usage
    assert "Reserved memory" in text and "20 MiB" in text and "fragmentation: 0.00" in text
    assert any(line.startswith("|     from large pool") for line in lines)
    del x


def test_format_bytes():
    assert mem.format_bytes(0) == "0 B" and mem.format_bytes(512) == "512 B"
    assert mem.format_bytes(1536) == "1.50 KiB" and mem.format_bytes(2 * MiB) == "2 MiB"
    assert mem.format_bytes(8 * 2**30) == "8 GiB"
