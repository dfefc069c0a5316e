"""Elementwise fusion (issue 15): a GELU(tanh) + layer-norm-like chain of 13 elementwise ops on 4M floats.

    .venv/bin/python benchmarks/fusion.py [--n 4194304] [--threads 2] [--repeat 7]
    PYTHONPATH=. /work/main/.venv-bench/bin/python benchmarks/fusion.py      # adds PyTorch eager / torch.compile

y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), then (y - mu) * rstd * gamma + beta with mu, rstd of
shape (rows, 1) computed beforehand (the normalisation's reductions are not part of the chain). Reported:
time per call (median, interleaved) of minigrad eager vs mg.compile (one blocked NumPy kernel) on one
thread and on ``--threads`` threads (blocked.THREADS: the blocks are split between threads, each with its
own block buffers), and the peak of temporary bytes above the inputs (tracemalloc: NumPy reports every
array allocation to it), against the goals of the issue: fused >= 2x faster, fused peak <= the output +
one cache-sized block (per thread: threads x buffers x block).
"""
import argparse
import sys
import time
import tracemalloc

from common import chain_arguments, interleaved_medians, pin_threads, quiet_inductor, table, try_import_torch

_THREADS = int(sys.argv[sys.argv.index("--threads") + 1]) if "--threads" in sys.argv else 2
pin_threads(_THREADS)

import numpy as np  # noqa: E402

import minigrad as mg  # noqa: E402
from minigrad.compiler import fused_kernels  # noqa: E402
from minigrad.compiler.fusion import blocked  # noqa: E402

K = 0.7978845608028654


def chain(x, mu, rstd, gamma, beta):
    y = 0.5 * x * (1.0 + (K * (x + 0.044715 * (x * x * x))).tanh())
    return (y - mu) * rstd * gamma + beta


def peak_bytes(fn):
    fn()
    tracemalloc.start()
    tracemalloc.reset_peak()
    out = fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak, out


def torch_variants(ins, threads):
    """[(name, callable)] of PyTorch eager and torch.compile on the same data, under no_grad; [] without
    torch (torch.compile is left out where inductor cannot run, e.g. without a C++ compiler)."""
    torch = try_import_torch(threads)
    if torch is None:
        return []
    tx = [torch.from_numpy(t.numpy()) for t in ins]
    variants = [("torch eager", chain)]
    try:
        quiet_inductor(torch)
        tc = torch.compile(chain)
        t0 = time.perf_counter()
        with torch.no_grad():
            tc(*tx)
        print(f"(torch.compile's first call: {time.perf_counter() - t0:.1f} s)")
        variants.append(("torch.compile", tc))
    except Exception as e:   # no C++ compiler for inductor, ...
        print(f"(torch.compile does not run here: {type(e).__name__}: {str(e)[:120]})")

    def call(f):
        def run():
            with torch.no_grad():
                return f(*tx)
        return run
    return [(name, call(f)) for name, f in variants]


def main():
    ap = chain_arguments(argparse.ArgumentParser(), _THREADS)
    ap.add_argument("--block", type=int, default=blocked.BLOCK, help="elements per block (and thread)")
    args = ap.parse_args()
    rows = args.n // args.cols
    rng = np.random.default_rng(0)
    x = mg.tensor(rng.standard_normal((rows, args.cols), dtype=np.float32))
    mu, rstd = mg.tensor(rng.standard_normal((rows, 1), dtype=np.float32)), mg.tensor(rng.random((rows, 1),
                                                                                               dtype=np.float32))
    gamma, beta = mg.tensor(rng.standard_normal(args.cols, dtype=np.float32)), mg.zeros(args.cols)
    ins = (x, mu, rstd, gamma, beta)
    fused = mg.compile(chain, block_size=args.block)

    def fused_on(threads):
        def run():
            blocked.THREADS = threads
            return fused(*ins)
        return run
    with mg.no_grad():
        fused(*ins)
        graph = fused.graphs()[0]
        kernel, = fused_kernels(graph)
        n_ops = len(kernel.steps)
        assert np.array_equal(fused(*ins).numpy(), chain(*ins).numpy())   # same ops in the same order: same bits
    n_blocks = len(blocked.block_plan(x.shape, (), kernel.block)[0])
    n_threads = blocked.threads_for(n_blocks, args.threads)    # fewer than asked on a small output
    ours = [("minigrad eager", lambda: chain(*ins)), ("mg.compile (fused, 1 thread)", fused_on(1))]
    if n_threads > 1:
        ours.append((f"mg.compile (fused, {n_threads} threads)", fused_on(args.threads)))
    theirs = torch_variants(ins, args.threads)
    with mg.no_grad():
        times = interleaved_medians([f for _, f in ours + theirs], repeat=args.repeat)   # one time window
        peaks = [peak_bytes(f) for _, f in ours]
    out = peaks[-1][1]
    rows_out = [(name, f"{t * 1e3:.1f}", f"{times[0] / t:.2f}", f"{peaks[k][0] / 2**20:.1f}" if k < len(ours) else "-")
                for k, ((name, _), t) in enumerate(zip(ours + theirs, times))]
    print(f"chain of {n_ops} elementwise ops on {rows}x{args.cols} float32 ({out.nbytes / 2**20:.0f} MiB out), "
          f"{n_blocks} blocks of {kernel.block} elements, {len(kernel.buffer_dtypes)} block buffer(s), "
          f"--threads {args.threads}")
    print(table(rows_out, ["variant", "ms/call", "speed-up vs eager", "peak temporaries MiB"]))
    budget = out.nbytes + blocked.temporaries_bytes(out.shape, kernel.buffer_dtypes, kernel.block, args.threads)
    scratch = n_threads * 65536   # NumPy's own iterator buffers while a broadcasting ufunc runs (eager has them too)
    p_fused = peaks[-1][0]
    print(f"fused peak on {n_threads} thread(s) {p_fused} B vs the output + {n_threads} thread(s) x "
          f"{len(kernel.buffer_dtypes)} buffer(s) x {kernel.block * out.itemsize} B = {budget} B, + {scratch} B of "
          f"NumPy iterator buffers: {'within' if p_fused <= budget + scratch else 'OVER'} budget; "
          f"eager peak {peaks[0][0] / out.nbytes:.1f}x the output")

if __name__ == "__main__":
    main()
