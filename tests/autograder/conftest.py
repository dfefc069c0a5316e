"""Fixtures for the autograder tests: the a0 demo assignment and notebooks built from scripts.
Helpers live in ag_support.py (imported by name from the tests, so no clash with other conftests)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ag_support import submission  # noqa: E402  (also sets AUTOGRADER_SPEC_PATH)


@pytest.fixture(scope="session")
def a0():
    from autograder.spec import load_assignment
    return load_assignment("a0")


@pytest.fixture
def make_sub(tmp_path):
    n = [0]

    def make(overrides=None, script=None, name=None, **kw):
        n[0] += 1
        return submission(tmp_path / f"{name or f'sub{n[0]}'}.ipynb", overrides, script, **kw)
    return make


@pytest.fixture
def grade(a0, tmp_path):
    from autograder.grader import GradeOptions, grade_notebook

    def run(path, **opts):
        opts.setdefault("artifacts_dir", tmp_path / "artifacts")
        return grade_notebook(path, a0, GradeOptions(**opts))
    return run
