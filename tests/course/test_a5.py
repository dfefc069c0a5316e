"""Assignment a5 (recomputation): the solution scores 100 % (public and hidden cases), the generated student
notebook scores 0 with a "not implemented" message per test, planted bugs lose exactly the tests they
should with feedback that names the bug, and an early part's failure never cascades into later parts.

Planted bugs live in a5_variants/, one file per submission: patches of the solution's graded cells
(see course_support.py).
"""
import sys
import types
from pathlib import Path

import nbformat
import numpy as np
import pytest

from autograder.generate import render, student_notebook
from autograder.grader import GradeOptions, grade_notebook
from autograder.spec import ROOT, Case, load_assignment
from course_support import (check_planted, grade_planted, cell_overrides, execute_notebook, forbidden_hits,
                            solution_cells_allowed, solution_with)

SOLUTION = ROOT / "solutions" / "a5_recomputation.ipynb"
STUDENT = ROOT / "assignments" / "a5_recomputation.ipynb"
VARIANTS = Path(__file__).resolve().parent / "a5_variants"

FULL = {
    "part1/gradients": 5, "part1/dropout: RNG replayed": 4, "part1/activations are not kept": 4,
    "part1/in-place change of an input": 2,
    "part2/gradients, every segment count": 4, "part2/segments": 3, "part2/sqrt(n) memory budget": 3,
    "part3/hand-made lifetimes": 3, "part3/training steps": 5, "part3/random lifetimes": 2,
}
CELL_OF_PART = {"part1": "a5-checkpoint", "part2": "a5-sequential", "part3": "a5-planner"}


@pytest.fixture(scope="module")
def a5():
    return load_assignment("a5")


@pytest.fixture(scope="module")
def spec(a5):
    return sys.modules[a5.module_name]


def variant(tmp_path, name):
    overrides = cell_overrides((VARIANTS / f"{name}.py").read_text(), SOLUTION)
    return solution_with(SOLUTION, tmp_path / f"a5_{name}.ipynb", overrides)


def grade(a5, path, tmp_path, **opts):
    return grade_notebook(path, a5, GradeOptions(artifacts_dir=tmp_path / "artifacts", **opts))


# ---- the spec -----------------------------------------------------------------------------------------------
def test_spec_parts_points_and_hidden_cases(a5):
    assert {f"{p.id}/{t.name}": t.points for p in a5.parts for t in p.tests} == FULL and a5.max_score == 35
    assert a5.graded_cells() == list(CELL_OF_PART.values())
    assert {f"{p}/{t}" for p, t in a5.hidden_cases()} == set(FULL)


def test_spec_forbids_the_library_but_not_the_solution(a5):
    for src in ["from minigrad.utils.checkpoint import checkpoint", "import minigrad.utils.checkpoint as c",
                "mg.utils.checkpoint.checkpoint(f, x)", "from minigrad.memory import planner",
                "minigrad.memory.planner.plan(lts)", "import torch"]:
        assert forbidden_hits(a5, src), src
    assert solution_cells_allowed(a5, SOLUTION) == []


def test_memory_verdicts_separate_checkpointing_from_keeping_everything(spec):
    """Guards the budgets against changes in minigrad: a 'checkpoint' that is a plain call keeps every
    activation after the forward and fails; minigrad's own checkpoint passes."""
    from minigrad.utils.checkpoint import checkpoint
    case = Case({"layers": 8, "width": 64, "batch": 32})
    plain = spec.observe_checkpoint_memory(types.SimpleNamespace(checkpoint=lambda f, *a: f(*a)), case)
    real = spec.observe_checkpoint_memory(types.SimpleNamespace(checkpoint=checkpoint), case)
    assert spec.verdict_memory(case, real, None).passed
    v = spec.verdict_memory(case, plain, None)
    assert not v.passed and "8.0 activations" in v.message


def test_observations_are_judged_not_believed(spec):
    """The plan verdict checks the offsets itself: an overlapping plan fails whatever the child claims."""
    case = Case({"kind": "known"})
    case.inputs = spec.inputs_lifetimes(case.params)
    v = spec.verdict_plan(case, {"offsets": np.zeros(4, np.int64)}, None)
    assert not v.passed and "live at the same time but overlap" in v.message


# ---- the solution and the student notebook ---------------------------------------------------------------------

# (the solution's full marks, hidden cases on, are checked beside the hostile corpus: tests/autograder/test_hostile_course.py)


def test_student_notebook_is_generated_from_the_solution():
    nb = nbformat.read(SOLUTION, as_version=4)
    assert STUDENT.read_bytes() == render(student_notebook(nb, "a5_recomputation"))
    assert "BEGIN SOLUTION" not in STUDENT.read_text() and "recomputed.pop" not in STUDENT.read_text()


def test_generated_notebook_scores_zero_with_not_implemented_per_test(a5, tmp_path):
    r = grade(a5, STUDENT, tmp_path)
    assert r.score == 0 and r.status == "ok"
    for t in r.tests:
        c = CELL_OF_PART[t.part]                   # said once for a part not started (the grader's wording)
        assert t.message.startswith("not implemented yet: this part is not started (its cells ") and \
            f"'{c}'" in t.message and "still raise NotImplementedError" in t.message, (t.key, t.message)


# ---- planted bugs ----------------------------------------------------------------------------------------------
# variant -> ({test: score} that differ from full marks, {test: substrings of its feedback})
PLANTED = {
    "forgets_rng": ({"part1/dropout: RNG replayed": 0},
                    {"part1/dropout: RNG replayed": ["differs from the run without checkpointing",
                                                     "drew new dropout masks", "mg.get_rng_state()"]}),
    "saves_activations": ({"part1/activations are not kept": 0},
                          {"part1/activations are not kept": ["after the forward, forward ops still hold",
                                                              "8.0 activations", "not the array"]}),
    "no_version_check": ({"part1/in-place change of an input": 0},
                         {"part1/in-place change of an input": ["modified in place", "_version"]}),
    "off_by_one_segments": ({"part2/segments": 0, "part2/sqrt(n) memory budget": 0},
                            {"part2/segments": ["8 functions in 1 segment(s)", "ran them [2, 2, 2, 2, 2, 2, 2, 2]",
                                                "the last segment takes the rest"],
                             "part2/sqrt(n) memory budget": ["over the budget"]}),
    "planner_ignores_later_tensors": (
        {"part3/hand-made lifetimes": 2, "part3/training steps": 0, "part3/random lifetimes": 0},
        {"part3/training steps": ["are live at the same time but overlap in memory"]}),
}


def test_every_variant_file_is_tested():
    assert {p.stem for p in VARIANTS.glob("*.py")} == set(PLANTED)


def test_planted_bugs_score_partially_and_name_them(a5, tmp_path):
    """Variants in different parts share a submission (course_support.grade_planted): each costs only its part."""
    graded = grade_planted(a5, SOLUTION, VARIANTS, sorted(PLANTED), tmp_path, lambda path: grade(a5, path, tmp_path))
    for name, (diff, feedback) in PLANTED.items():
        result, parts = graded[name]
        check_planted(name, result, parts, FULL, diff, feedback)


def test_broken_checkpoint_does_not_cascade(a5, tmp_path):
    """A checkpoint that raises fails part 1 only: part 2 runs on the reference checkpoint."""
    broken = "def checkpoint(fn, *args, preserve_rng_state=True):\n    raise RuntimeError('broken')\n"
    path = solution_with(SOLUTION, tmp_path / "a5_broken.ipynb", {"a5-checkpoint": broken})
    r = grade(a5, path, tmp_path)
    assert all(t.score == 0 for t in r.tests if t.part == "part1")
    assert all(t.passed for t in r.tests if t.part != "part1"), [(t.key, t.message) for t in r.tests]


@pytest.mark.notebook
def test_solution_notebook_executes_and_self_checks_pass():
    outs, text = execute_notebook(SOLUTION)
    assert not [o for o in outs if o.output_type == "error"]
    for part, points in (("part1", 15), ("part2", 10), ("part3", 10)):
        assert f"a5 {part}: {points}/{points} points" in text
    assert "same gradient with and without checkpointing: True" in text
