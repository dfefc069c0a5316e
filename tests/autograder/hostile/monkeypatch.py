"""Wrong answers, plus every lie the child can tell: numpy's comparisons, the spec's verdicts, the
harness's writer and json, minigrad. None of it can reach the parent."""
# %% [a0-square]
import json
import sys

import numpy as np

np.allclose = lambda *a, **k: True
np.testing.assert_allclose = lambda *a, **k: None
np.isclose = lambda a, b, *r, **k: np.ones(np.shape(a), bool)

import autograder.verdicts as V
from autograder.spec import Verdict
V.compare = lambda *a, **k: Verdict.ok()
V.check_gradient = lambda *a, **k: Verdict.ok()
spec = sys.modules["autograder.assignments.a0_demo"]
spec.verdict_square = lambda *a, **k: Verdict.ok()
spec.ASSIGNMENT.parts[0].tests[0].points = 1000

main = sys.modules["__main__"]
main._write = lambda *a, **k: None
json.dumps = lambda *a, **k: '{"ok": true, "score": 1000, "passed": true}'

try:
    import minigrad
    minigrad.__dict__["autograd"] = None
except Exception:
    pass

def square(x):
    return x + 1.0
