"""The benchmark scripts run (tiny settings); their numbers are recorded in benchmarks/RESULTS.md, not asserted."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(script, *args, env=None):
    e = dict(os.environ, **(env or {}))
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args], cwd=ROOT, env=e,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_overhead_runs():
    out = run("overhead.py", "--repeat", "1", "--number", "1")
    assert "minigrad" in out and "us/op" in out


def test_gpu_bench_runs_on_the_emulator():
    out = run("gpu_bench.py", "--quick", env={"MINIGRAD_EMULATE_CUDA": "1"})
    assert "emulated" in out and "MLP step" in out and "Transformer block" in out


@pytest.mark.slow
def test_train_step_runs():
    out = run("train_step.py", "--repeat", "1", "--only", "mlp,memory")
    assert "hand-written NumPy" in out and "peak / lower bound" in out
