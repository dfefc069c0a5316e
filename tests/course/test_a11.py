"""Assignment a11 (the capstone: train under a memory budget): the spec, the handout generated from the solution
and graded 0 without a child, the reference losses of the spec's table, planted bugs with pointed messages, and
a class graded with its leaderboard (the top entries re-run by the grader, exported beside the grades).

The solution's full marks with hidden cases are checked beside the hostile corpus
(tests/autograder/test_hostile_course.py). Planted bugs live in a11_variants/ (patches of the solution's
graded cells, see course_support.py)."""
import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.generate import render, student_notebook
from autograder.grader import GradeOptions, grade_notebook
from autograder.spec import ROOT, load_assignment
from course_support import cell_overrides, forbidden_hits, result_of, scores, solution_cells, solution_with

SOLUTION = ROOT / "solutions" / "a11_capstone.ipynb"
STUDENT = ROOT / "assignments" / "a11_capstone.ipynb"
VARIANTS = Path(__file__).resolve().parent / "a11_variants"

FULL = {"part1/gradients equal the full batch's": 10, "part1/the peak of a step": 10,
        "part2/reaches the validation loss": 30, "part2/fits the budget": 30, "part2/time under the budget": 20}
CELL_OF_PART = {"part1": "a11-step", "part2": "a11-train"}
PART2 = [k for k in FULL if k.startswith("part2/")]

# variant -> ({test: score} where it differs from full marks, {test: substrings of its feedback})
PLANTED = {
    "step_not_scaled": (
        {"part1/gradients equal the full batch's": 0, "part1/the peak of a step": 0},
        {"part1/gradients equal the full batch's": ["it is 4x the full batch's", "len(micro-batch) / len(batch)"],
         "part1/the peak of a step": ["credited only to a step whose gradients are right"]}),
    "over_budget": (
        {"part2/fits the budget": 0, "part2/time under the budget": 0},
        {"part2/fits the budget": ["over budget: peak 2.0", "budget 1.40 MiB", "micro-batches"],
         "part2/time under the budget": ["credited only to a run that fits the budget"]}),
    "loss_not_reached": (
        {k: 0 for k in PART2},
        {"part2/reaches the validation loss": ["loss not reached", "above the bound", "the reference run"],
         "part2/fits the budget": ["credited only to a run that trains"]}),
    "forged_timing": (
        {k: 0 for k in PART2},
        {k: ["your code replaced `time.process_time`"] for k in PART2}),
}


@pytest.fixture(scope="module")
def a11():
    return load_assignment("a11")


def test_spec_parts_points_cells_and_hidden_cases(a11):
    assert {f"{p.id}/{t.name}": t.points for p in a11.parts for t in p.tests} == FULL and a11.max_score == 100
    assert a11.graded_cells() == list(CELL_OF_PART.values())
    hidden = {f"{p}/{t}": cases for (p, t), cases in a11.hidden_cases().items()}
    assert set(hidden) == set(FULL) - {"part2/time under the budget"}
    tight = hidden["part2/fits the budget"][0].params["budget"]
    assert tight < a11.part("part2").tests[1].public_cases()[0].params["budget"], "the hidden budget is tighter"


def test_forbidden_shortcuts_are_refused_and_the_solution_uses_none(a11):
    for src in ["from minigrad.budget import plan_training", "mg.budget.TrainStep(model, opt)",
                "import minigrad.examples.eight_gb as e", "import mmap", "a = np.memmap('f', mode='w+')",
                "import subprocess", "import threading", "import torch"]:
        assert forbidden_hits(a11, src), src
    for gid, src in solution_cells(SOLUTION).items():
        assert not forbidden_hits(a11, src), gid


def test_each_grading_draws_its_own_data_seed_and_judges_with_it(a11):
    """The training data's seed is drawn at random once per grading process (the spec is public: a fixed seed
    could be trained for at cell time), shared by part 2's tests, and handed to the child with the arrays."""
    spec = sys.modules[a11.module_name]
    case = a11.part("part2").tests[0].public_cases()[0]
    first = spec.inputs_data(case.params)
    assert int(first["seed"]) == spec.data_seed(case.params) == int(spec.inputs_data(case.params)["seed"])
    assert spec.data_seed({"seed": "fresh-other"}) != spec.data_seed(case.params)
    assert spec.data_seed({"seed": 5}) == 5
    x, y = spec.digits(int(first["seed"]), "train")
    xv, yv = spec.digits(int(first["seed"]), "test")
    assert (x == first["x"]).all() and x.shape == (1438, 64) and xv.shape == (359, 64) and set(yv) == set(range(10))
    loss, start = spec.reference_loss(int(first["seed"]))
    assert loss < 0.6 < 2.0 < start            # the reference run trains; the untrained model is at log(10)


def test_self_check_in_process_passes_on_the_solution(capsys):
    from autograder import check
    ns = {"__name__": "a11_solution"}
    exec("import numpy as np\nimport minigrad as mg\nfrom minigrad import nn\n"
         "from minigrad.nn import functional as F\n", ns)
    for gid, src in solution_cells(SOLUTION).items():
        exec(compile(src, f"<{gid}>", "exec"), ns)
    for part, points in {"part1": 20, "part2": 80}.items():
        res = check("a11", part, namespace=ns)
        assert res.score == res.max_score == points, res.messages


def test_student_notebook_is_generated_and_scores_zero_without_a_child(a11, tmp_path):
    nb = nbformat.read(SOLUTION, as_version=4)
    assert STUDENT.read_bytes() == render(student_notebook(nb, "a11_capstone"))
    assert "BEGIN SOLUTION" not in STUDENT.read_text() and "per_row" not in STUDENT.read_text()
    r = grade_notebook(STUDENT, a11, GradeOptions(hidden=True))
    assert r.score == 0 and r.max_score == 100 and r.status == "ok"
    for t in r.tests:
        assert re.search(rf"this part is not started \(its cells '{CELL_OF_PART[t.part]}' still raise", t.message)


def test_every_variant_file_is_planted():
    assert {p.stem for p in VARIANTS.glob("*.py")} == set(PLANTED)


def _check(r, names):
    got, diff = scores(r), {}
    for name in names:
        diff.update(PLANTED[name][0])
    assert got == pytest.approx({**FULL, **diff}, abs=1e-3), {k: v for k, v in got.items() if v != FULL[k]}
    for name in names:
        for key, needles in PLANTED[name][1].items():
            msg = result_of(r, key).message
            for text in needles:
                assert text in msg, (name, key, text, msg)


def test_planted_bugs_in_both_parts_cost_their_own_points(a11, tmp_path):
    """A bug in part 1 and one in part 2 in one submission: each costs exactly its part's tests."""
    overrides = {}
    for name in ("step_not_scaled", "loss_not_reached"):
        overrides.update(cell_overrides((VARIANTS / f"{name}.py").read_text(), SOLUTION))
    r = grade_notebook(solution_with(SOLUTION, tmp_path / "a11_planted.ipynb", overrides), a11, GradeOptions())
    assert r.status == "ok"
    _check(r, ("step_not_scaled", "loss_not_reached"))


SLOWER = """# %% [a11-train] patch
# <<<
    micro = batch_size
    while micro > 1 and fixed + micro * per_row > 0.9 * budget:   # a 10 % margin
        micro //= 2                                           # halves: the largest that fits is the fastest
# ===
    micro = 32                       # fits, with twice as many round trips per step as the budget needs
# >>>
"""


@pytest.mark.slow
def test_a_class_gets_its_grades_and_a_leaderboard_the_grader_reran(tmp_path):
    """A class: the reference, a slower correct entry, and the over-budget and forged-timing planted bugs. The
    grades carry the planted bugs' messages; the leaderboard lists only the two runs under budget, re-run by
    the grader (kernel-timed, in fresh children) and exported beside the grades as CSV and JSON."""
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "reference.ipynb").write_bytes(SOLUTION.read_bytes())
    solution_with(SOLUTION, folder / "slower.ipynb", cell_overrides(SLOWER, SOLUTION))
    for name in ("over_budget", "forged_timing"):
        solution_with(SOLUTION, folder / f"{name}.ipynb", cell_overrides((VARIANTS / f"{name}.py").read_text(),
                                                                          SOLUTION))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-m", "autograder", "grade", str(folder), "-a", "a11", "-j", "2",
                        "--csv", str(tmp_path / "grades.csv"), "--json", str(tmp_path / "results.json"),
                        "--leaderboard-repeats", "1"], capture_output=True, text=True, timeout=900, env=env,
                       cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    data = json.loads((tmp_path / "results.json").read_text())
    from autograder.results import SubmissionResult, TestResult
    for row in data["submissions"]:
        if row["submission"] in PLANTED:
            r = SubmissionResult(row["submission"], "", "a11_capstone", [
                TestResult(*t["name"].split(": ", 1), t["max_score"], t["score"], t["output"]) for t in row["tests"]])
            _check(r, (row["submission"],))
        else:
            assert row["score"] == row["max_score"] == 100, row
    board = data["leaderboard"]
    assert [e["submission"] for e in board] == ["reference", "slower"], board     # the budget's best is fastest
    assert [e["rank"] for e in board] == [1, 2] and all(e["status"] == "verified" and e["runs"] == 1 for e in board)
    assert board[0]["verified_s"] < board[1]["verified_s"] and all(e["peak"] < e["budget"] for e in board)
    rows = list(csv.DictReader(open(tmp_path / "grades-leaderboard.csv")))
    assert [r["submission"] for r in rows] == ["reference", "slower"] and rows[0]["status"] == "verified"
    assert "leaderboard (part2/time under the budget" in p.stdout and "control child" in p.stdout
