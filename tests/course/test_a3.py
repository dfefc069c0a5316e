"""Assignment a3 (the training loop): the solution scores 100 % (public and hidden cases), the generated
student notebook scores 0 with a "not implemented" message per test, planted bugs score partially with
feedback that names the mistake, and a broken part never cascades into other parts (planted bugs are
graded in groups, one per part, each costing exactly its own points).

Planted bugs live in a3_variants/, one file per submission (patches of the solution's graded cells in the
``# %% [cell-id] patch`` format of course_support.py).
"""
import re
from pathlib import Path

import nbformat
import pytest

from autograder import check
from autograder.forbidden import forbidden_uses
from autograder.generate import render, student_notebook
from autograder.grader import GradeOptions, grade_notebook
from autograder.spec import ROOT, load_assignment
from course_support import cell_overrides, result_of, scores, solution_cells, solution_with

SOLUTION = ROOT / "solutions" / "a3_training_loop.ipynb"
STUDENT = ROOT / "assignments" / "a3_training_loop.ipynb"
VARIANTS = Path(__file__).resolve().parent / "a3_variants"

FULL = {
    "part1/first step": 2, "part1/closed-form trajectory": 5, "part1/decoupled weight decay": 2,
    "part1/a parameter without gradient": 1, "part1/optimizer memory": 4,
    "part2/closed form at every step": 4, "part2/the scheduler drives the optimizer": 4,
    "part3/returns the global norm": 2, "part3/clipped to max_norm, direction kept": 4,
    "part3/below max_norm: untouched": 1, "part3/in place": 1,
    "part4/micro-batches equal the full batch": 5, "part4/a non-finite step is skipped": 4,
    "part4/returns the loss": 1,
}
PART_POINTS = {"part1": 14, "part2": 8, "part3": 8, "part4": 10}
CELL_OF_PART = {"part1": "a3-adamw", "part2": "a3-schedule", "part3": "a3-clip", "part4": "a3-accum"}

# variant -> ({test: score} where it differs from full marks, {test: substrings of its feedback})
PLANTED = {
    "adam_no_bias_correction": (
        {"part1/first step": 0, "part1/closed-form trajectory": 0, "part1/decoupled weight decay": 0,
         "part1/a parameter without gradient": 0},
        {"part1/first step": ["after step 1", "without bias correction", "(1 - beta1**t)"]}),
    "adam_l2_decay": (
        {"part1/first step": 0, "part1/closed-form trajectory": 0, "part1/decoupled weight decay": 0,
         "part1/optimizer memory": 0},
        {"part1/decoupled weight decay": ["weight decay added to the gradient (L2",
                                          "p *= 1 - lr * weight_decay"]}),
    "adam_naive_temporaries": (
        {"part1/optimizer memory": 0},
        {"part1/optimizer memory": ["peak 3.01 MiB, budget 2.07 MiB", "about 3.0 parameter-sized temporaries",
                                    "out="]}),
    "adam_wrong_sign": (
        {"part1/first step": 0, "part1/closed-form trajectory": 0, "part1/decoupled weight decay": 0,
         "part1/a parameter without gradient": 0},
        {"part1/first step": ["parameter 0 after step 1 of 1: parameter wrong at index (", "opposite sign"],
         "part1/closed-form trajectory": ["after step 1 of 6"]}),
    "accum_zero_division": (
        {"part4/micro-batches equal the full batch": 0, "part4/a non-finite step is skipped": 0,
         "part4/returns the loss": 0},
        {"part4/returns the loss": ["ZeroDivisionError: division by zero", 'File "<cell a3-accum>", line 6',
                                    "loss = loss_fn(x, y) * (len(x) / total)",
                                    "(every failing case of these tests raised it)"]}),
    "schedule_off_by_one": (
        {"part2/closed form at every step": 4 / 3, "part2/the scheduler drives the optimizer": 2},
        {"part2/closed form at every step": ["lr_at(t=0, ...) returned 0.0, expected 0.01666",
                                             "not 0 (t counts from 0)"]}),
    "schedule_one_base_lr": (
        {"part2/the scheduler drives the optimizer": 2},
        {"part2/the scheduler drives the optimizer": ["every group got the same lr"]}),
    "clip_per_parameter": (
        {"part3/clipped to max_norm, direction kept": 0},
        {"part3/clipped to max_norm, direction kept": ["clipped to max_norm on its own", "one global norm"]}),
    "clip_no_sqrt": (
        {"part3/returns the global norm": 0, "part3/clipped to max_norm, direction kept": 0},
        {"part3/returns the global norm": ["sum of squares: take its square root"]}),
    "accum_not_scaled": (
        {"part4/micro-batches equal the full batch": 0, "part4/returns the loss": 0},
        {"part4/micro-batches equal the full batch": ["it is 4x the full batch's", "divide each micro-batch's loss"]}),
    "accum_divide_by_k": (
        {"part4/micro-batches equal the full batch": 2.5, "part4/returns the loss": 0},
        {"part4/micro-batches equal the full batch": ["sizes 10, 6, 4", "len(micro-batch) / total samples"]}),
    "nan_not_skipped": (
        {"part4/a non-finite step is skipped": 0},
        {"part4/a non-finite step is skipped": ["yet the optimizer stepped", "isfinite"]}),
}


@pytest.fixture(scope="module")
def a3():
    return load_assignment("a3")


def grade(a3, path, tmp_path, **opts):
    opts.setdefault("artifacts_dir", tmp_path / "artifacts")
    return grade_notebook(path, a3, GradeOptions(**opts))


def test_spec_parts_points_and_cells(a3):
    assert [p.id for p in a3.parts] == list(PART_POINTS)
    assert {p.id: p.points for p in a3.parts} == PART_POINTS and a3.max_score == 40
    assert {f"{p.id}/{t.name}": t.points for p in a3.parts for t in p.tests} == FULL
    assert a3.graded_cells() == list(CELL_OF_PART.values())
    hidden = a3.hidden_cases()
    assert set(f"{p}/{t}" for p, t in hidden) == set(FULL), "every test has hidden cases"


def test_forbidden_patterns_catch_minigrads_versions_but_not_the_solution(a3):
    def hits(src):      # the grader's check: the rules on the cell's syntax tree, after the preamble
        return forbidden_uses(src, a3.forbidden, a3.preamble)
    for src in ["opt = mg.optim.AdamW(params)", "from minigrad.optim.adam import adam_update",
                "mg.optim.lr_scheduler.warmup_cosine(opt, 1, 2)", "mg.nn.utils.clip_grad_norm_(ps, 1)",
                "from minigrad.nn.utils import clip_grad_norm_ as c", "import torch"]:
        assert hits(src), src
    for gid, src in solution_cells(SOLUTION).items():
        assert not hits(src), gid



# (the solution's full marks, hidden cases on, are checked beside the hostile corpus: tests/autograder/test_hostile_course.py)


def test_self_check_in_process_passes_on_the_solution(capsys):
    ns = {"__name__": "a3_solution"}
    exec("import math\nimport numpy as np\nimport minigrad as mg\n", ns)
    for gid, src in solution_cells(SOLUTION).items():
        exec(compile(src, f"<{gid}>", "exec"), ns)
    for part, points in PART_POINTS.items():
        res = check("a3", part, namespace=ns)
        assert res.score == res.max_score == points, res.messages
    assert "a3 part4: 10/10 points" in capsys.readouterr().out


@pytest.mark.notebook
def test_solution_notebook_executes_and_self_checks_pass():
    from nbclient import NotebookClient
    nb = nbformat.read(SOLUTION, as_version=4)
    NotebookClient(nb, timeout=180, kernel_name="python3",
                   resources={"metadata": {"path": str(SOLUTION.parent)}}).execute()
    outs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outs if o.output_type == "stream")
    for part, points in PART_POINTS.items():
        assert f"a3 {part}: {points}/{points} points" in text
    assert sum("image/png" in o.get("data", {}) for o in outs if o.output_type == "display_data") >= 2


def test_student_notebook_is_generated_from_the_solution():
    nb = nbformat.read(SOLUTION, as_version=4)
    assert STUDENT.read_bytes() == render(student_notebook(nb, "a3_training_loop"))
    text = STUDENT.read_text()
    assert "BEGIN SOLUTION" not in text and "np.divide(m, w, out=w)" not in text and "isfinite" not in text


def test_generated_notebook_scores_zero_with_not_implemented_per_test(a3, tmp_path):
    r = grade(a3, STUDENT, tmp_path, hidden=True)
    assert r.score == 0 and r.max_score == 40 and r.status == "ok"
    for t in r.tests:                  # every part, part 2 too (its cell raises at its top level)
        cell = CELL_OF_PART[t.part]
        assert re.search(rf"not implemented yet: this part is not started \(its cells .*'{cell}'.* still raise "
                         rf"NotImplementedError\)", t.message), (t.key, t.message)


# One submission per group, one planted bug in each part: each bug must cost exactly its own points, so a
# group also shows that no part's failure cascades into another (and grading stays at 3 submissions).
GROUPS = [("adam_no_bias_correction", "schedule_off_by_one", "clip_per_parameter", "accum_not_scaled"),
          ("adam_l2_decay", "schedule_one_base_lr", "clip_no_sqrt", "accum_divide_by_k"),
          ("adam_naive_temporaries", "nan_not_skipped"), ("adam_wrong_sign", "accum_zero_division")]


def test_every_variant_file_is_tested():
    assert {p.stem for p in VARIANTS.glob("*.py")} == set(PLANTED) == {n for g in GROUPS for n in g}


@pytest.mark.parametrize("group", GROUPS, ids=lambda g: "+".join(g))
def test_planted_bugs_score_partially_name_the_mistake_and_do_not_cascade(a3, tmp_path, group):
    overrides, diff = {}, {}
    for name in group:
        cells = cell_overrides((VARIANTS / f"{name}.py").read_text(), SOLUTION)
        assert not set(cells) & set(overrides), "one bug per part in a group"
        overrides.update(cells)
        diff.update(PLANTED[name][0])
    r = grade(a3, solution_with(SOLUTION, tmp_path / "a3_planted.ipynb", overrides), tmp_path)
    assert r.status == "ok"
    got = scores(r)
    assert got == pytest.approx({**FULL, **diff}, abs=1e-3), {k: v for k, v in got.items() if v != FULL[k]}
    assert 0 < r.score < r.max_score
    for name in group:
        for key, parts in PLANTED[name][1].items():
            msg = result_of(r, key).message
            for text in parts:
                assert text in msg, (name, key, text, msg)
            assert len(re.findall(r"\bstep \d+|t=\d+", msg.split("(")[0])) <= 1, msg   # one step named
            m = re.search(r"index \(([^)]*)\)", msg)
            if key.startswith("part1/") and m:       # an element of the parameter, not (step, *shape)
                assert m.group(1).count(",") + 1 <= 2, msg
    from autograder.results import format_report
    assert format_report(r).count("(every failing case of these tests raised it)") <= 1, "one error, said once"


def test_importing_minigrads_adamw_costs_its_part(a3, tmp_path):
    src = ("import minigrad as mg\n\n\nclass AdamW(mg.optim.AdamW):\n    pass\n")
    r = grade(a3, solution_with(SOLUTION, tmp_path / "a3_copied.ipynb", {"a3-adamw": src}), tmp_path)
    assert scores(r) == {**FULL, **{k: 0 for k in FULL if k.startswith("part1/")}}
