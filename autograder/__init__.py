"""minigrad's course autograder: grades student notebooks in a sandbox; see autograder/README.md.

    python -m autograder grade PATH [--assignment a1] [--json results.json] [--csv grades.csv]
    python -m autograder gradescope-bundle a1 [--out DIR]
    python -m autograder generate [--check]

From a notebook cell, ``from autograder import check; check("a1", "part1")`` runs the public tests of a
part on the notebook's own definitions (a self-check; grades never come from it).
"""
from __future__ import annotations

__all__ = ["check"]


def check(assignment: str, part: str | None = None, namespace: dict | None = None):
    """Run the public tests of `part` (all parts if None) on the caller's definitions and print a report."""
    import sys
    from .selfcheck import check as _check
    ns = namespace if namespace is not None else sys._getframe(1).f_globals
    return _check(assignment, part, ns)
