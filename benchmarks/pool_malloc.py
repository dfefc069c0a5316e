"""Cost of one malloc+free pair in minigrad's caching pool, next to the obvious baselines.

    python benchmarks/pool_malloc.py [--quick]

Rows (µs per pair, median of several runs after a warm-up; each pair is a cache hit, which is the
steady state of a training step):

- ``minigrad pool (raw)``: CachingAllocator.malloc + free, the algorithm alone;
- ``minigrad cpu storage``: NumpyStorage.empty + dropping the array (what a cpu tensor costs);
- ``numpy.empty``: the allocation the cpu pool replaces;
- on a GPU (cupy importable and a device present): ``cupy default pool`` (cupy.cuda.alloc with CuPy's
  MemoryPool) and ``minigrad pool via cupy`` (cupy.cuda.alloc with our pool installed). The issue's goal
  is <= 5 µs per pair for the latter.
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from minigrad.memory import CachingAllocator, CPUSource, cupy_pool  # noqa: E402
from minigrad.memory.storage import NumpyStorage  # noqa: E402

SIZES = [("4 KiB", 4 << 10), ("256 KiB", 256 << 10), ("4 MiB", 4 << 20), ("32 MiB", 32 << 20)]


def per_pair_us(pair, n, repeats):
    for _ in range(max(n // 10, 10)):             # warm-up: segments obtained, caches hot
        pair()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(n):
            pair()
        times.append((time.perf_counter() - t) / n * 1e6)
    return statistics.median(times)


def cpu_rows(nbytes, n, repeats):
    alloc = CachingAllocator(CPUSource(), "cpu")
    storage = NumpyStorage(alloc)
    count = nbytes // 4
    return {
        "minigrad pool (raw)": per_pair_us(lambda: alloc.free(alloc.malloc(nbytes)), n, repeats),
        "minigrad cpu storage": per_pair_us(lambda: storage.empty((count,), np.float32), n, repeats),
        "numpy.empty": per_pair_us(lambda: np.empty((count,), np.float32), n, repeats),
    }


def gpu_rows(nbytes, n, repeats):
    try:
        import cupy
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return {}
    except Exception:
        return {}
    rows = {"cupy default pool": per_pair_us(lambda: cupy.cuda.alloc(nbytes), n, repeats)}
    alloc = CachingAllocator(cupy_pool.CupySource(0), "cuda:0")
    cupy_pool.install(lambda i: (alloc, None))
    try:
        rows["minigrad pool via cupy"] = per_pair_us(lambda: cupy.cuda.alloc(nbytes), n, repeats)
    finally:
        cupy_pool.uninstall()
        alloc.empty_cache()
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few iterations (a smoke run, ~1 s)")
    args = parser.parse_args()
    n, repeats = (2000, 3) if args.quick else (20000, 7)
    results = {label: {**cpu_rows(nbytes, n, repeats), **gpu_rows(nbytes, n, repeats)}
               for label, nbytes in SIZES}
    names = list(next(iter(results.values())))
    print(f"malloc+free pair, µs (median of {repeats} x {n}; lower is better)")
    print("| size     | " + " | ".join(f"{name:>22}" for name in names) + " |")
    print("|----------|" + "|".join("-" * 24 for _ in names) + "|")
    for label, row in results.items():
        print(f"| {label:<8} | " + " | ".join(f"{row[name]:>22.2f}" for name in names) + " |")
    if "cupy default pool" in names:
        worst = max(row["minigrad pool via cupy"] for row in results.values())
        print(f"\nminigrad pool via cupy, worst size: {worst:.2f} µs per pair (goal <= 5 µs)")


if __name__ == "__main__":
    main()
