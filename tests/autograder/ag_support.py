"""Shared helpers for the autograder tests (conftest.py holds the fixtures)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
HOSTILE = HERE / "hostile"
SOLUTION_SCRIPT = FIXTURES / "solutions" / "a0_demo.py"
SOLUTION_NB = FIXTURES / "solutions" / "a0_demo.ipynb"
FULL = {"part1/forward": 2, "part2/gradient": 3, "part3/composed gradient": 2, "part4/packing": 3}

# Spec lookup for this process and every grader subprocess it starts.
os.environ["AUTOGRADER_SPEC_PATH"] = str(FIXTURES / "assignments")
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from ag_nbtools import cells_from_script, write_notebook  # noqa: E402


def solution_cells():
    return cells_from_script(SOLUTION_SCRIPT.read_text())


def submission(path: Path, overrides: dict[str, str] | None = None, script: Path | str | None = None,
               assignment: str | None = "a0") -> Path:
    """The solution notebook with some graded cells replaced (from `overrides` and/or a script)."""
    over = dict(overrides or {})
    if script is not None:
        text = Path(script).read_text() if isinstance(script, Path) else script
        for ctype, gid, src in cells_from_script(text):
            if gid:
                over[gid] = src
    cells = [(t, gid, over.pop(gid) if gid in over else src) for t, gid, src in solution_cells()]
    cells += [("code", gid, src) for gid, src in over.items()]   # new ids: appended
    return write_notebook(path, cells, assignment)


def scores(result) -> dict[str, float]:
    return {t.key: t.score for t in result.tests}


def get_test(result, key):
    for t in result.tests:
        if t.key == key:
            return t
    raise KeyError(key)
