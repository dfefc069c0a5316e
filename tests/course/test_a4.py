"""Assignment a4 (mixed precision): the solution scores 100 % (public and hidden cases), the generated
student notebook scores 0 with a "not implemented" message per test, each planted bug (a4_variants/) loses
points only in its own part with feedback that names the mistake, and a broken early part never cascades.

Planted bugs are graded on their own part only (grade_part): the cascade test grades one whole notebook.
"""
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.forbidden import forbidden_uses
from autograder.generate import render, student_notebook
from autograder.grader import GradeOptions, grade_notebook, grade_part, reference_cells
from autograder.notebook import load_submission
from autograder.spec import ROOT, load_assignment
from course_support import cell_overrides, solution_with

SOLUTION = ROOT / "solutions" / "a4_mixed_precision.ipynb"
STUDENT = ROOT / "assignments" / "a4_mixed_precision.ipynb"
VARIANTS = Path(__file__).resolve().parent / "a4_variants"
FULL = {"part1/scale_loss": 2, "part1/scale trace on scripted overflows": 10, "part2/unscale in place": 3,
        "part2/inf/NaN found": 4, "part2/unscaled float16 gradients match float32": 5,
        "part3/skipped step is bit-identical": 4, "part3/small updates accumulate": 6,
        "part4/saved-activation bytes": 4, "part4/loss and gradients": 4,
        "part5/converges with the scaler, stalls without": 8}
CELL_OF_PART = {"part1": "a4-scaler", "part2": "a4-unscale", "part3": "a4-master", "part4": "a4-forward",
                "part5": "a4-train"}


@pytest.fixture(scope="module")
def a4():
    return load_assignment("a4")


def variant(tmp_path, name):
    overrides = cell_overrides((VARIANTS / f"{name}.py").read_text(), SOLUTION)
    return solution_with(SOLUTION, tmp_path / f"a4_{name}.ipynb", overrides), overrides


def test_spec_parts_points_cells_and_hidden_cases(a4):
    assert {f"{p.id}/{t.name}": t.points for p in a4.parts for t in p.tests} == FULL and a4.max_score == 50
    assert a4.graded_cells() == list(CELL_OF_PART.values())
    hidden = a4.hidden_cases()
    assert {f"{p}/{t}" for p, t in hidden} == set(FULL)
    spec = sys.modules[a4.module_name]
    sub = load_submission(SOLUTION)
    for src in ["scaler = mg.amp.GradScaler()", "from minigrad.amp import master_weights", "with mg.autocast('cpu'):\n    y = 1"]:
        assert forbidden_uses(src, spec.FORBIDDEN, a4.preamble), src         # the grader's syntax-tree check
    for cid in a4.graded_cells():
        assert not forbidden_uses(sub.cells[cid], spec.FORBIDDEN, a4.preamble), cid


def test_reference_trace_is_pytorchs_rule_written_out(a4):
    """The parent's expected trace comes from minigrad's GradScaler: pin it to the rule, written by hand."""
    spec = sys.modules[a4.module_name]
    got = spec.reference_trace({"init_scale": 8.0, "growth_interval": 3}, [0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 1, 0])
    assert got.tolist() == [8, 8, 16, 8, 8, 8, 16, 16, 16, 32, 16, 8, 8]



# (the solution's full marks, hidden cases on, are checked beside the hostile corpus: tests/autograder/test_hostile_course.py)


def test_student_notebook_is_generated_and_scores_zero(a4, tmp_path):
    assert STUDENT.read_bytes() == render(student_notebook(nbformat.read(SOLUTION, as_version=4), "a4_mixed_precision"))
    assert "BEGIN SOLUTION" not in STUDENT.read_text() and "self.growth_tracker = 0\n        else" not in STUDENT.read_text()
    r = grade_notebook(STUDENT, a4, GradeOptions(artifacts_dir=tmp_path))
    assert r.score == 0 and r.status == "ok"
    for t in r.tests:
        assert t.message.startswith("not implemented yet: this part is not started (its cells ") and \
            f"'{CELL_OF_PART[t.part]}'" in t.message and "still raise NotImplementedError" in t.message, \
            (t.key, t.message)


# variant -> (its part, {test: score} where it differs from full marks, {test: substrings of the feedback})
PLANTED = {
    "tracker_not_reset": ("part1", {"part1/scale trace on scripted overflows": 10 / 3},
                          {"part1/scale trace on scripted overflows": ["after step 26", "growth_tracker += 1",
                                                                       "the scale is 32768, expected 16384"]}),
    "grows_one_step_late": ("part1", {"part1/scale trace on scripted overflows": 0},
                            {"part1/scale trace on scripted overflows": ["after step 2", "reaches growth_interval",
                                                                         "the scale is 8, expected 16"]}),
    "unscale_multiplies": ("part2", {"part2/unscale in place": 0, "part2/unscaled float16 gradients match float32": 0},
                           {"part2/unscaled float16 gradients match float32": ["did you divide by the scale 65536"]}),
    "isinf_misses_nan": ("part2", {"part2/inf/NaN found": 3},
                         {"part2/inf/NaN found": ["bad=nan", "returned False, but one gradient holds nan",
                                                  "np.isinf misses NaN"]}),
    "unscale_not_in_place": ("part2", {"part2/unscale in place": 0,
                                       "part2/unscaled float16 gradients match float32": 0},
                             {"part2/unscale in place": ["unchanged after the call", "in place"]}),
    "steps_on_inf": ("part3", {"part3/skipped step is bit-identical": 0},
                     {"part3/skipped step is bit-identical": ["found_inf=True changed master 0", "bit-identical"]}),
    "no_masters": ("part3", {"part3/small updates accumulate": 0},
                   {"part3/small updates accumulate": ["master 0 after 50 steps", "half a float16 spacing"]}),
    "all_float32": ("part4", {"part4/saved-activation bytes": 0},
                    {"part4/saved-activation bytes": ["36,160 B is over the budget of 19,888 B"]}),
    "float16_loss": ("part4", {"part4/loss and gradients": 0, "part4/saved-activation bytes": 0},
                     {"part4/loss and gradients": ["returned a minigrad.float16 loss", ".float()"],
                      "part4/saved-activation bytes": ["credited only to a forward whose loss and gradients"]}),
    "no_unscale": ("part5", {"part5/converges with the scaler, stalls without": 0},
                   {"part5/converges with the scaler, stalls without": ["with the scaler", "unscale_"]}),
}


def test_every_variant_file_is_tested():
    assert {p.stem for p in VARIANTS.glob("*.py")} == set(PLANTED)


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_planted_bug_loses_points_in_its_part_with_pointed_feedback(a4, tmp_path, name):
    part_id, diff, feedback = PLANTED[name]
    path, overrides = variant(tmp_path, name)
    assert list(overrides) == [CELL_OF_PART[part_id]]
    tests, status, _ = grade_part(a4, a4.part(part_id), load_submission(path).cells, GradeOptions(), set(),
                                  reference_cells(a4))
    assert status == "ok"
    got = {f"{t.part}/{t.name}": t.score for t in tests}
    want = {k: v for k, v in FULL.items() if k.startswith(part_id + "/")}
    want.update(diff)
    assert got == pytest.approx(want, abs=1e-3), got
    by_key = {f"{t.part}/{t.name}": t for t in tests}
    for key, parts in feedback.items():
        for s in parts:
            assert s in by_key[key].message, (key, s, by_key[key].message)


def test_broken_part1_does_not_cascade(a4, tmp_path):
    """part5 trains with LossScaler: with a broken part-1 scaler in the notebook it still gets full marks
    (the reference LossScaler overrides the student's in later parts)."""
    path, _ = variant(tmp_path, "grows_one_step_late")
    tests, status, _ = grade_part(a4, a4.part("part5"), load_submission(path).cells, GradeOptions(), set(),
                                  reference_cells(a4))
    assert status == "ok" and [t.score for t in tests] == [8]


def test_using_minigrad_amp_costs_its_part(a4, tmp_path):
    src = "def unscale_(grads, scale):\n    from minigrad.amp import GradScaler\n    return False\n"
    path = solution_with(SOLUTION, tmp_path / "a4_copied.ipynb", {"a4-unscale": src})
    tests, _, _ = grade_part(a4, a4.part("part2"), load_submission(path).cells, GradeOptions(), set(),
                             reference_cells(a4))
    assert all(t.score == 0 and "which this assignment asks you to write yourself" in t.message for t in tests)
