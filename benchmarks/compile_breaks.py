"""Graph breaks (issue 15): a fusable chain of 10 elementwise ops on 4M floats with one ``.item()`` in the
middle, eager vs mg.compile's piecewise replay (Python runs every call; each half is one fused kernel) vs
torch.compile (Dynamo breaks the graph at ``.item()`` too and resumes after it).

    .venv/bin/python benchmarks/compile_breaks.py [--n 4194304] [--threads 2] [--repeat 7] [--backward]
    PYTHONPATH=. /work/main/.venv-bench/bin/python benchmarks/compile_breaks.py      # adds PyTorch

Reported: ms per call (median, interleaved), the speed-up over minigrad eager, and mg.compile's stats
(every timed call must be a piecewise replay without deopt). ``--backward`` times forward + backward.
"""
import argparse
import sys

from common import chain_arguments, interleaved_medians, pin_threads, table, try_import_torch

_THREADS = int(sys.argv[sys.argv.index("--threads") + 1]) if "--threads" in sys.argv else 2
pin_threads(_THREADS)

import numpy as np  # noqa: E402

import minigrad as mg  # noqa: E402


def chain(x, b):
    h = ((x * 1.5 + b).tanh() * 0.5 + 0.25).sigmoid()    # 5 ops
    s = h.mean().item()                                  # graph break: Python reads a value
    y = (h - s).exp() * (1.0 / (1.0 + abs(s)))           # 5 more ops, with the value read
    return (y * y + 1.0).sqrt()


def make_step(fn, x, b, no_grad, backward):
    """One timed call: forward under ``no_grad``, or forward + backward (minigrad and PyTorch alike)."""
    def step():
        if not backward:
            with no_grad():
                return fn(x, b)
        x.grad = None
        out = fn(x, b)
        out.sum().backward()
        return out
    return step


def main():
    ap = chain_arguments(argparse.ArgumentParser(), _THREADS)
    ap.add_argument("--backward", action="store_true")
    args = ap.parse_args()
    rows = max(1, args.n // args.cols)
    rng = np.random.default_rng(0)
    x0, b0 = rng.standard_normal((rows, args.cols), dtype=np.float32), rng.standard_normal(args.cols, dtype=np.float32)
    x, b = mg.tensor(x0, requires_grad=args.backward), mg.tensor(b0)
    compiled = mg.compile(chain)

    eager, comp = (make_step(f, x, b, mg.no_grad, args.backward) for f in (chain, compiled))
    np.testing.assert_allclose(comp().detach().numpy(), eager().detach().numpy(), rtol=1e-5, atol=1e-5)
    t_eager, t_comp = interleaved_medians([eager, comp], repeat=args.repeat)
    stats = dict(compiled.stats)
    assert stats["deopts"] == 0 and stats["piecewise"] >= args.repeat, stats
    kernels = sum(n.op_name == "fused_elementwise" for g in compiled.graphs() for n in g.nodes)
    out = [("minigrad eager", f"{t_eager * 1e3:.1f}", "1.00"),
           (f"mg.compile piecewise ({kernels} fused kernels)", f"{t_comp * 1e3:.1f}", f"{t_eager / t_comp:.2f}")]
    torch = try_import_torch(args.threads)
    if torch is not None:
        tx, tb = torch.tensor(x0, requires_grad=args.backward), torch.tensor(b0)
        tc = None
        try:
            tc = make_step(torch.compile(chain), tx, tb, torch.no_grad, args.backward)
            tc()
        except Exception as e:   # no C++ compiler for inductor, ...
            print(f"(torch.compile does not run here: {type(e).__name__}: {str(e)[:120]})")
            tc = None
        times = interleaved_medians([make_step(chain, tx, tb, torch.no_grad, args.backward)] + ([tc] if tc else []),
                                    repeat=args.repeat)
        out.append(("torch eager", f"{times[0] * 1e3:.1f}", f"{t_eager / times[0]:.2f}"))
        if tc:
            out.append(("torch.compile (graph break at .item())", f"{times[1] * 1e3:.1f}", f"{t_eager / times[1]:.2f}"))
    what = "forward + backward" if args.backward else "forward (no_grad)"
    print(f"10 elementwise ops and one .item() on {rows}x{args.cols} float32, {what}, {args.threads} threads")
    print(table(out, ["variant", "ms/call", "speed-up vs minigrad eager"]))
    print(f"mg.compile stats: {stats}")


if __name__ == "__main__":
    main()
