"""The profiler benchmarks run (tiny settings); numbers go to benchmarks/RESULTS.md, never asserted."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_profiler_overhead_benchmark_runs():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "profiler_overhead.py"), "--quick"],
                          cwd=ROOT / "benchmarks", capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "on+shapes+memory" in proc.stdout and "tiny GPT" in proc.stdout


def test_profiler_gpu_check_refuses_without_a_real_gpu():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "profiler_gpu_check.py")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(ROOT)})
    assert proc.returncode == 1 and "needs a real CUDA device" in proc.stderr
