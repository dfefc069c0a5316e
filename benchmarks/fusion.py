"""Elementwise fusion (issue 15): a GELU(tanh) + layer-norm-like chain of 13 elementwise ops on 4M floats.

    .venv/bin/python benchmarks/fusion.py [--n 4194304] [--threads 2] [--repeat 7]
    PYTHONPATH=. /work/main/.venv-bench/bin/python benchmarks/fusion.py      # adds PyTorch eager / torch.compile

y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), then (y - mu) * rstd * gamma + beta with mu, rstd of
shape (rows, 1) computed beforehand (the normalisation's reductions are not part of the chain). Reported:
time per call (median) of minigrad eager vs mg.compile (one blocked NumPy kernel), and the peak of
temporary bytes above the inputs (tracemalloc: NumPy reports every array allocation to it), against the
goals of the issue: fused >= 2x faster, fused peak <= the output + a few cache-sized blocks.
"""
import argparse
import sys
import tracemalloc

from common import interleaved_medians, pin_threads, table, try_import_torch

_THREADS = int(sys.argv[sys.argv.index("--threads") + 1]) if "--threads" in sys.argv else 2
pin_threads(_THREADS)

import numpy as np  # noqa: E402

import minigrad as mg  # noqa: E402
from minigrad.compile import fused_kernels  # noqa: E402

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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1 << 22)
    ap.add_argument("--cols", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=_THREADS)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    rows = args.n // args.cols
    rng = np.random.default_rng(0)
    x = mg.tensor(rng.standard_normal((rows, args.cols), dtype=np.float32))
    mu, rstd = mg.tensor(rng.standard_normal((rows, 1), dtype=np.float32)), mg.tensor(rng.random((rows, 1),
                                                                                               dtype=np.float32))
    gamma, beta = mg.tensor(rng.standard_normal(args.cols, dtype=np.float32)), mg.zeros(args.cols)
    ins = (x, mu, rstd, gamma, beta)
    fused = mg.compile(chain)
    with mg.no_grad():
        fused(*ins)
        graph = fused.graphs()[0]
        kernel, = fused_kernels(graph)
        n_ops = len(kernel.steps)
        np.testing.assert_allclose(fused(*ins).numpy(), chain(*ins).numpy(), rtol=1e-5, atol=1e-5)
        t_eager, t_fused = interleaved_medians([lambda: chain(*ins), lambda: fused(*ins)], repeat=args.repeat)
        p_eager, _ = peak_bytes(lambda: chain(*ins))
        p_fused, out = peak_bytes(lambda: fused(*ins))
    rows_out = [("minigrad eager", f"{t_eager * 1e3:.1f}", "1.00", f"{p_eager / 2**20:.1f}"),
                ("mg.compile (fused)", f"{t_fused * 1e3:.1f}", f"{t_eager / t_fused:.2f}", f"{p_fused / 2**20:.1f}")]
    torch = try_import_torch(args.threads)
    if torch is not None:
        tx = [torch.from_numpy(t.numpy()) for t in ins]
        tc = None
        try:
            tc = torch.compile(chain)
            tc(*tx)
        except Exception as e:   # no C++ compiler for inductor, ...
            print(f"(torch.compile does not run here: {type(e).__name__}: {str(e)[:120]})")
            tc = None
        with torch.no_grad():
            fns = [lambda: chain(*tx)] + ([lambda: tc(*tx)] if tc else [])
            times = interleaved_medians(fns, repeat=args.repeat)
        rows_out.append(("torch eager", f"{times[0] * 1e3:.1f}", f"{t_eager / times[0]:.2f}", "-"))
        if tc:
            rows_out.append(("torch.compile", f"{times[1] * 1e3:.1f}", f"{t_eager / times[1]:.2f}", "-"))
    print(f"chain of {n_ops} elementwise ops on {rows}x{args.cols} float32 ({out.nbytes / 2**20:.0f} MiB out), "
          f"block {kernel.block} elements, {len(kernel.buffer_dtypes)} block buffer(s), {args.threads} threads")
    print(table(rows_out, ["variant", "ms/call", "speed-up vs eager", "peak temporaries MiB"]))
    budget = out.nbytes + len(kernel.buffer_dtypes) * kernel.block * 4
    print(f"fused peak {p_fused} B vs output + block buffers {budget} B "
          f"({'within' if p_fused <= budget + 65536 else 'OVER'} budget); eager peak {p_eager / out.nbytes:.1f}x the output")


if __name__ == "__main__":
    main()
