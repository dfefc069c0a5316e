"""Per-op overhead of two or more minigrad trees, side by side: did a change make ops slower?

    git worktree add /tmp/before <commit> --detach
    python benchmarks/overhead_ab.py /tmp/before .            [--rounds 6]

Times the chain of ``overhead.py`` (200 chained 8x8 mul/add ops, forward then backward) in a fresh process
per tree (``PYTHONPATH=<tree>``), alternating the trees for ``--rounds`` rounds so that both see the same
drift of a shared machine, and prints each tree's best round. One thread, no PyTorch: this compares
minigrad with itself (``overhead.py`` compares it with PyTorch). ``--cpu-time`` times with the process's
CPU time instead of the wall clock: on a loaded machine the time the process waits for a core is not
counted (what remains still varies with cache and frequency sharing, less).
"""
import argparse
import os
import subprocess
import sys

CHILD = r"""
import sys, time, timeit, numpy as np, minigrad as mg
timer = time.process_time if sys.argv[1] == "cpu" else time.perf_counter
rng = np.random.default_rng(0)
x = mg.tensor(rng.standard_normal((8, 8)).astype(np.float32), requires_grad=True)
w = mg.tensor(rng.standard_normal((8, 8)).astype(np.float32))
def fwd():
    y = x
    for _ in range(100):
        y = y * w
        y = y + x
    return y
def both():
    fwd().sum().backward()
f = min(timeit.repeat(fwd, number=20, repeat=15, timer=timer)) / 20 / 200 * 1e6
t = min(timeit.repeat(both, number=20, repeat=15, timer=timer)) / 20 / 200 * 1e6
print(f, t)
"""


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trees", nargs="+", help="minigrad checkouts (folders holding the minigrad package)")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--cpu-time", action="store_true", help="time with process CPU time (loaded machines)")
    args = p.parse_args(argv)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    best = {t: (float("inf"), float("inf")) for t in args.trees}
    for _ in range(args.rounds):
        for tree in args.trees:
            out = subprocess.run([sys.executable, "-c", CHILD, "cpu" if args.cpu_time else "wall"],
                                 env=dict(env, PYTHONPATH=os.path.abspath(tree)),
                                 cwd=tree, capture_output=True, text=True, check=True).stdout.split()
            f, t = float(out[0]), float(out[1])
            if t < best[tree][1]:
                best[tree] = (f, t)
    clock = "process CPU time" if args.cpu_time else "wall clock"
    print(f"200 chained 8x8 mul/add ops, 1 thread, best of {args.rounds} alternating rounds (us/op, {clock})")
    print(f"{'tree':40s} {'forward':>8s} {'backward':>9s} {'total':>7s}")
    for tree, (f, t) in best.items():
        print(f"{tree:40s} {f:8.2f} {t - f:9.2f} {t:7.2f}")


if __name__ == "__main__":
    main()
