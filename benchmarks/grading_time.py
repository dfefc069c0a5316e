"""Grading time of a class: every reference solution of the course, graded as one batch (`python -m autograder
grade FOLDER -j 1`), by this checkout and by another (e.g. the main branch before a change), interleaved.

    python benchmarks/grading_time.py [--other /path/to/other/checkout] [--repeats 3] [--hidden]

Prints the wall time and the CPU time (the grader and its children) of each run, and the minimum of each
column per checkout. On a shared machine the CPU time is the steadier figure: contention stretches wall time.
"""
import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(root: Path, python: str, folder: Path, hidden: bool) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    cmd = [python, "-m", "autograder", "grade", str(folder), "-j", "1", "-q", "--json", str(folder.parent / "r.json")]
    p = subprocess.run(cmd + (["--hidden"] if hidden else []), cwd=root, capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(root)))
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode:
        sys.exit(p.stderr[-2000:])
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--other", type=Path, help="another checkout to compare with (its own .venv is used)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--hidden", action="store_true")
    args = ap.parse_args()
    checkouts = [("this", ROOT)] + ([("other", args.other.resolve())] if args.other else [])
    folder = Path(tempfile.mkdtemp(prefix="grading-time-")) / "class"
    folder.mkdir()
    for sol in sorted((ROOT / "solutions").glob("a*.ipynb")):
        shutil.copy(sol, folder / sol.name)
    rows = {name: [] for name, _ in checkouts}
    for i in range(args.repeats):
        for name, root in checkouts if i % 2 == 0 else reversed(checkouts):
            py = str(root / ".venv" / "bin" / "python")
            wall, cpu = run(root, py if Path(py).exists() else sys.executable, folder, args.hidden)
            rows[name].append((wall, cpu))
            print(f"{name:6} run {i + 1}: wall {wall:6.1f} s   cpu {cpu:6.1f} s", flush=True)
    n = len(list(folder.glob("*.ipynb")))
    print(f"\n{'checkout':10} {'min wall (s)':>13} {'min cpu (s)':>12}   ({n} notebooks, "
          f"{'hidden cases' if args.hidden else 'public cases'})")
    for name, root in checkouts:
        walls, cpus = [w for w, _ in rows[name]], [c for _, c in rows[name]]
        print(f"{name + ' ' + root.name:10} {min(walls):13.1f} {min(cpus):12.1f}")
    shutil.rmtree(folder.parent)


if __name__ == "__main__":
    main()
