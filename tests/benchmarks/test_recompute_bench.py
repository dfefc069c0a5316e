"""The recomputation and planner benchmarks run (tiny settings); their numbers go to RESULTS.md."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(script, *args):
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_recompute_curve_runs():
    out = run("recompute_curve.py", "--quick")
    assert "peak act" in out and "theory (s-1)+n/s" in out and "tiny GPT" in out


def test_planner_bench_runs_and_replays_identically():
    out = run("planner.py", "--quick")
    rows = [line for line in out.splitlines() if line.startswith(("MLP", "CNN", "tiny GPT"))]
    assert len(rows) == 3 and all(line.rstrip().endswith("yes") for line in rows)


def test_recompute_gpu_check_passes_on_the_emulator():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "recompute_gpu_check.py"), "--quick"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env=dict(os.environ, MINIGRAD_EMULATE_CUDA="1"))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "replay identical: True" in proc.stdout and "recompute gpu check: ok" in proc.stdout
