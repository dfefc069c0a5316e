"""Per-op overhead: a chain of 200 tiny (8x8) mul/add ops, then backward; minigrad vs PyTorch CPU eager.

    python benchmarks/overhead.py            (PyTorch is measured when importable: make bench installs it)

The floor: the same chain written by hand in NumPy (forward, then the backward's NumPy calls: what any
NumPy framework must call at least); "above the floor" is minigrad's own cost per op (dispatch, graph,
engine). ``--cpu-time`` times with the process's CPU time (a loaded machine's waits not counted).
"""
import argparse
import sys
import time

from common import median_time, pin_threads, table, try_import_torch

pin_threads(1)
import numpy as np  # noqa: E402

import minigrad as mg  # noqa: E402

N_OPS = 200


def chain(x, w):
    y = x
    for _ in range(N_OPS // 2):
        y = y * w
        y = y + x
    y.sum().backward()


def numpy_chain(x, w):
    """The hand-written floor: the chain's NumPy calls forward, and those its backward needs."""
    y = x
    for _ in range(N_OPS // 2):
        y = y * w
        y = y + x
    g, gx = np.ones_like(y), np.zeros_like(x)
    for _ in range(N_OPS // 2):
        gx = gx + g         # add's gradient reaching x
        g = g * w           # mul's gradient reaching y
    return gx + g


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--repeat", type=int, default=9)
    p.add_argument("--number", type=int, default=20)
    p.add_argument("--cpu-time", action="store_true", help="time with process CPU time (loaded machines)")
    args = p.parse_args(argv)
    timer = time.process_time if args.cpu_time else time.perf_counter
    rng = np.random.default_rng(0)
    xs, ws = rng.standard_normal((8, 8)).astype(np.float32), rng.standard_normal((8, 8)).astype(np.float32)
    rows = []
    x = mg.tensor(xs, requires_grad=True)
    w = mg.tensor(ws)
    t_mg = median_time(lambda: chain(x, w), args.repeat, args.number, timer=timer) / N_OPS
    t_np = median_time(lambda: numpy_chain(xs, ws), args.repeat, args.number, timer=timer) / N_OPS
    rows.append(["minigrad", f"{t_mg * 1e6:.2f}", "1.00"])
    rows.append(["NumPy calls alone (the floor)", f"{t_np * 1e6:.2f}", f"{t_np / t_mg:.2f}"])
    rows.append(["minigrad above the floor", f"{(t_mg - t_np) * 1e6:.2f}", ""])
    torch = try_import_torch(1)
    if torch is not None:
        tx = torch.tensor(xs, requires_grad=True)
        tw = torch.tensor(ws)
        t_pt = median_time(lambda: chain(tx, tw), args.repeat, args.number, timer=timer) / N_OPS
        rows.append([f"torch {torch.__version__}", f"{t_pt * 1e6:.2f}", f"{t_pt / t_mg:.2f}"])
        rows.append(["minigrad / torch", f"{t_mg / t_pt:.2f}x", ""])
    else:
        print("(PyTorch not importable: run `make bench` to measure it side by side)", file=sys.stderr)
    print(f"forward+backward cost per op, {N_OPS} ops on 8x8 float32, 1 thread, median of {args.repeat}")
    print(table(rows, ["framework", "us/op", "torch/this"]))


if __name__ == "__main__":
    main()
