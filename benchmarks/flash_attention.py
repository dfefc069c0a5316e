"""Attention memory and time vs sequence length (issue 15): naive (L x S scores) vs tiled (flash).

    .venv/bin/python benchmarks/flash_attention.py [--lengths 256,512,1024,2048,4096,8192] [--device cpu]
    .venv/bin/python benchmarks/flash_attention.py --device cuda      # on a GPU: peaks from the memory pool

q = k = v of shape (8, L, 64) float32 (batch * heads = 8, d = 64), forward + backward. Peak bytes: on cpu
from tracemalloc (NumPy reports every array it allocates, temporaries included); on cuda from minigrad's
memory pool, which every CuPy allocation goes through (mg.memory.max_memory_allocated). Goals: at L=8192
flash's peak <= 1/8 of naive's, flash's time <= 1.5x naive's.
"""
import argparse
import sys
import time
import tracemalloc

from common import pin_threads, table

pin_threads(int(sys.argv[sys.argv.index("--threads") + 1]) if "--threads" in sys.argv else 2)

import minigrad as mg  # noqa: E402
import minigrad.memory as mem  # noqa: E402
import minigrad.nn.functional as F  # noqa: E402
from minigrad.ops.nn.flash_attention import flash_attention  # noqa: E402


def step(kind, q, k, v):
    out = F.scaled_dot_product_attention(q, k, v, use_flash=False) if kind == "naive" else \
        flash_attention(q, k, v)
    out.sum().backward()


def measure(kind, L, device, heads=8, d=64, trace=True):
    """(peak bytes, seconds) of one forward+backward; tracemalloc only when ``trace`` (it slows NumPy)."""
    mg.manual_seed(0)
    q, k, v = (mg.randn(heads, L, d, device=device, requires_grad=True) for _ in range(3))
    trace = trace and device == "cpu"
    if trace:
        tracemalloc.start()
        tracemalloc.reset_peak()
    else:
        mem.reset_peak_memory_stats(device)
    base = 0 if device == "cpu" else mem.memory_allocated(device)
    t0 = time.perf_counter()
    step(kind, q, k, v)
    if device != "cpu":
        mg.cuda.synchronize()
    dt = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1] if trace else mem.max_memory_allocated(device) - base \
        if device != "cpu" else 0
    if trace:
        tracemalloc.stop()
    return peak, dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lengths", default="256,512,1024,2048,4096,8192")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    if args.device != "cpu":
        mem.enable(args.device)
    rows = []
    for kind in ("naive", "flash"):   # warm-up (first calls pay for imports and page faults)
        measure(kind, 256, args.device)
    for L in [int(x) for x in args.lengths.split(",")]:
        res = {}
        for kind in ("naive", "flash"):   # the better of two runs (a shared machine drifts)
            peak = measure(kind, L, args.device)[0]
            res[kind] = (peak, min(measure(kind, L, args.device, trace=False)[1] for _ in range(2)))
        (pn, tn), (pf, tf) = res["naive"], res["flash"]
        rows.append((L, f"{pn / 2**20:.1f}", f"{pf / 2**20:.1f}", f"{pf / pn:.3f}", f"{tn * 1e3:.0f}",
                     f"{tf * 1e3:.0f}", f"{tf / tn:.2f}"))
    print(f"attention forward+backward, (8, L, 64) float32 on {args.device}")
    print(table(rows, ["L", "naive peak MiB", "flash peak MiB", "flash/naive", "naive ms", "flash ms",
                       "time ratio"]))


if __name__ == "__main__":
    main()
