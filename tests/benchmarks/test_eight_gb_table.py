"""benchmarks/eight_gb.py's table in the source's layout, from saved results (no PyTorch, no training)."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MiB = 2 ** 20


def test_the_source_layout_from_saved_results(tmp_path):
    ref = {"peak": 20 * MiB, "step_s": 0.010, "val_loss": 0.5, "metric": 0.9, "params": 1_250_000, "batch": 128}
    fit = {"peak": 14 * MiB, "step_s": 0.0125, "val_loss": 0.51, "metric": 0.9, "choice": "float32, whole batch",
           "target": 20 * MiB}
    results = {"digits": {"PyTorch default": ref, "minigrad @ 100%": fit,
                          "minigrad @ 50%": {"target": 10 * MiB, "error": "plan_training: ... (x), 1.50 MiB missing. At"}}}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(results))
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "eight_gb.py"), "--from-json", str(path)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    assert lines[0].startswith("| task | params | batch | PyTorch peak MiB | PyTorch ms/step")
    assert lines[2] == ("| digits | 1.25 M | 128 | 20.0 | 10.0 | 0.5000 / 90.0% | @ 100% | 20.0 | 14.0 (0.70) | 12.5 "
                        "| 0.80x | 0.5100 / 90.0% | float32, whole batch |")
    assert lines[3].startswith("|  |  |  |  |  |  | @ 50% | 10.0 | does not fit (1.50 MiB missing) |")
