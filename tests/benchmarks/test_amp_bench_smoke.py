"""benchmarks/amp_step.py runs (tiny batches, one timing; numbers go to RESULTS.md, never asserted), and
its memory measure sees autocast's float16 saved activations."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_amp_step_quick_runs_on_cpu_and_the_emulator():
    for args, env in ((["--quick", "--only", "time"], {}), (["--quick", "--device", "cuda", "--only", "memory"],
                                           {"MINIGRAD_EMULATE_CUDA": "1"})):
        proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "amp_step.py"), *args], cwd=ROOT,
                              env=dict(os.environ, **env), capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert ("step ms" if "time" in args else "saved activations") in proc.stdout and "GPT block" in proc.stdout


def test_memory_measure_halves_the_cnn_activations():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import amp_step
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    (s32, p32), (s16, p16) = (amp_step.measure_memory(amp_step.cnn_case, "cpu", amp, 32) for amp in (False, True))
    assert 0.3 < s16 / s32 < 0.6 and p16 > 0 and p32 > 0
