"""The benchmark scripts run (tiny settings); their numbers are recorded in benchmarks/RESULTS.md, not asserted."""
import math
import os
import re
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


def test_overhead_ab_compares_trees():
    out = run("overhead_ab.py", str(ROOT), "--rounds", "1")
    row = [line for line in out.splitlines() if line.startswith(str(ROOT))][0].split()
    assert len(row) == 4 and float(row[3]) > 0 and all(math.isfinite(float(v)) for v in row[1:])  # parts: differences, noisy


def test_gpu_bench_runs_on_the_emulator():
    out = run("gpu_bench.py", "--quick", env={"MINIGRAD_EMULATE_CUDA": "1"})
    assert "emulated" in out and "MLP step" in out and "Transformer block" in out


@pytest.mark.slow
def test_train_step_runs():
    out = run("train_step.py", "--repeat", "1", "--only", "mlp,memory")
    assert "hand-written NumPy" in out and "peak / lower bound" in out


def test_numpy_cnn_floor_computes_the_same_step_as_minigrad():
    """The hand-written NumPy CNN is a fair floor only if it does the same work: one SGD step from the same
    weights must give minigrad's updated weights (its layouts differ: channels-last, bias columns)."""
    import numpy as np
    import minigrad as mg
    import minigrad.nn as nn
    import minigrad.nn.functional as F
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import train_step
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    step = train_step.numpy_cnn(4)
    W1, W2, W3 = (w.copy() for w in step.params)

    def to_minigrad(W1, W2, W3):
        """NumPy-floor weights -> (conv1.w, conv1.b, conv2.w, conv2.b, linear.w, linear.b) in PyTorch's layout."""
        return (W1[:, :9].reshape(32, 1, 3, 3), W1[:, 9],
                W2[:, :288].reshape(64, 3, 3, 32).transpose(0, 3, 1, 2), W2[:, 288],
                W3[:, :1600].reshape(10, 5, 5, 64).transpose(0, 3, 1, 2).reshape(10, 1600), W3[:, 1600])

    model = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64 * 5 * 5, 10))
    params = [model[0].weight, model[0].bias, model[3].weight, model[3].bias, model[7].weight, model[7].bias]
    before = to_minigrad(W1, W2, W3)
    for p, value in zip(params, before):
        p.array[...] = value
    opt = mg.optim.SGD(model.parameters(), lr=0.01)
    F.cross_entropy(model(mg.tensor(step.x[:, None])), mg.tensor(step.y)).backward()
    opt.step()
    step()
    for p, old, new in zip(params, before, to_minigrad(*step.params)):
        update = new - old                          # the updates (lr * grad) must agree, not just weights
        assert np.abs(update).max() > 1e-6
        np.testing.assert_allclose(p.detach().numpy() - old, update, rtol=2e-3, atol=1e-7)


@pytest.mark.mpi
@pytest.mark.skipif(__import__("importlib").util.find_spec("mpi4py") is None, reason="needs mpi4py (the dist extra)")
def test_ddp_scaling_runs_on_one_and_two_ranks():
    out = run("ddp_scaling.py", "--models", "mlp", "--steps", "1", "--batch", "4", "--torch-python", "/nonexistent",
              env={"OMP_NUM_THREADS": "1"})
    assert "minigrad mlp | 1 |" in out and "minigrad mlp | 2 |" in out and "ring 2(N-1)/N B" in out


def test_gpu_check_keeps_to_its_time_budget(tmp_path):
    """make gpu-check must fit a lent device's minutes: steps share GPU_CHECK_BUDGET, and a step that finds
    it spent is reported as not run (failing the check) instead of running past it. A fake python3 that
    takes 2 s per command stands in for the GPU machine's."""
    fake = tmp_path / "python3"
    fake.write_text("#!/bin/sh\nif [ \"$1\" = \"-\" ]; then cat >/dev/null; echo 'fake gpu'; exit 0; fi\n"
                    "sleep 2\necho ran \"$@\"\n")
    fake.chmod(0o755)
    out_dir = tmp_path / "out"
    proc = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_check.sh")], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env=dict(os.environ, PYTHON=str(fake), OUT=str(out_dir),
                                                           GPU_CHECK_BUDGET="13"))
    log = (out_dir / "gpu_check.txt").read_text()
    assert proc.returncode == 1, log
    assert re.search(r"== cuda test cases \(pytest -m gpu\) \(limit 1[23]s\)", log) and "ran -m pytest" in log
    assert re.search(r"== compile: fused .*\(limit 1[01]s\)", log)   # what was left, not its own 60 s
    assert "NOT RUN (gpu-check budget of 13s spent)" in log and "pool malloc+free: NOT RUN" in log
