"""make gpu-check's scripts on CPU. benchmarks/gpu_kernel_check.py runs on the NumPy CUDA emulator and
reports a mismatch as a failure (that its cases launch every kernel of the catalogue is tested in
tests/backend/test_cuda_kernels_on_cpu.py, its comparison of CuPy's compiled sources with the real CuPy in
tests/cuda/test_nvrtc.py); gpu_bench.py counts a step's device-to-host reads. gpu_check.sh's time budget is
tested in tests/benchmarks/test_bench_smoke.py."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import minigrad as mg

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def gkc():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import gpu_kernel_check
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return gpu_kernel_check


def test_runs_on_the_emulator_and_passes():
    proc = subprocess.run([sys.executable, "benchmarks/gpu_kernel_check.py", "--dtypes", "float32,float16"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={"MINIGRAD_EMULATE_CUDA": "1", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    out = proc.stdout
    assert "ok    gelu (tanh) float16" in out and "ok    master weights float16" in out
    assert "ok    GradScaler inf found float32" in out and "ok    fusion where float32" in out
    assert "skip  CuPy's compiled sources" in out and out.rstrip().endswith("== 0 failed")


def test_a_mismatch_is_a_failure(gkc, capsys):
    if not mg.cuda.is_available():
        pytest.skip("needs the NumPy CUDA emulator (MINIGRAD_EMULATE_CUDA=1)")

    def differs(dt, device):
        return [mg.tensor(np.array([1.0, 2.0 if device == "cpu" else 2.5], dtype=dt), device=device)]
    failures = []
    gkc.compare("planted", "float32", differs, failures)
    gkc.compare("same", "float32", lambda dt, device: [mg.ones(2, device=device)], failures)
    gkc.compare("left on the host", "float32", lambda dt, device: [mg.ones(2)], failures)
    assert failures == ["planted float32", "left on the host float32"]
    out = capsys.readouterr().out
    assert "FAIL  planted float32: AssertionError" in out and "ok    same float32" in out
    assert "result on cpu" in out


def test_gpu_bench_counts_device_to_host_reads():
    """gpu_bench.py's traffic count: every read through the cuda backend's to_host, and nothing left behind."""
    if not mg.cuda.is_available():
        pytest.skip("needs the NumPy CUDA emulator (MINIGRAD_EMULATE_CUDA=1)")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import gpu_bench
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    x = mg.ones(3, device="cuda")
    with gpu_bench.HostReads() as reads:
        total = (x * 2).sum().item()
        x.cpu()
        (x + 1).sum()                       # stays on the device
    assert total == 6.0 and (reads.reads, reads.bytes) == (2, 4 + 12)
    assert "to_host" not in vars(reads.backend)    # the backend's own method is back
