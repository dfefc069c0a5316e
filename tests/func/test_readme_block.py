"""The README's function-transform example runs as written and computes what its comments say."""
import re
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_func_example_runs_and_agrees():
    block = next(b for b in re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
                 if "minigrad.func" in b)
    ns = {}
    exec(compile(block, "README func example", "exec"), ns)
    assert tuple(ns["per_example"].shape) == (8, 3) and tuple(ns["H"].shape) == (3, 3)
    np.testing.assert_allclose(ns["per_example"].numpy().mean(0), ns["g"].numpy(), rtol=1e-10)
    np.testing.assert_allclose(ns["Hv"].numpy(), ns["H"].numpy() @ np.ones(3), rtol=1e-8)
    assert tuple(ns["J"].shape) == (8, 8, 3)
