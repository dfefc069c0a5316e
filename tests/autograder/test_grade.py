"""Grading the a0 demo: full marks, planted bugs, no cascading, hidden cases, reports."""
import csv
import json
from pathlib import Path


from autograder.grader import _cells_for, reference_cells
from autograder.results import write_csv, write_json
from ag_support import FULL, get_test, scores


def test_solution_scores_full_marks_quickly(make_sub, grade):
    r = grade(make_sub())
    assert scores(r) == FULL, r
    assert r.status == "ok" and r.score == r.max_score == 10
    assert r.execution_time < 30, "one submission must grade in well under 60 s"


def test_hidden_cases_and_tests_are_added_only_on_request(make_sub, grade):
    path = make_sub()
    public, hidden = grade(path), grade(path, hidden=True)
    assert public.max_score == 10 and hidden.max_score == 11
    assert get_test(hidden, "part1/forward").cases == 4 and get_test(public, "part1/forward").cases == 2
    assert get_test(hidden, "part1/large values").passed


def test_public_only_solution_fails_hidden_cases_with_shape_message(make_sub, grade):
    path = make_sub({"a0-square": "def square(x):\n    return (x * x).ravel()\n"})
    assert get_test(grade(path), "part1/forward").passed           # public cases are 1-D
    t = get_test(grade(path, hidden=True), "part1/forward")
    assert not t.passed and "hidden case 1" in t.message
    assert "has shape (12,), expected (4, 3)" in t.message


def test_wrong_forward_names_worst_index_and_does_not_cascade(make_sub, grade):
    r = grade(make_sub({"a0-square": "def square(x):\n    return 2 * x\n"}))
    t = get_test(r, "part1/forward")
    assert t.score == 0 and "square(x): output wrong at index" in t.message
    assert "got" in t.message and "expected" in t.message and "relative error" in t.message
    # part 3 calls square(): graded with the reference square, so it still passes
    assert scores(r) == {**FULL, "part1/forward": 0}


def test_wrong_gradient_message_is_gradcheck_style(make_sub, grade):
    r = grade(make_sub({"a0-square-backward": "def square_backward(x, grad):\n    return x * grad\n"}))
    t = get_test(r, "part2/gradient")
    assert t.score == 0
    assert "square_backward: gradient w.r.t. `x` wrong at index" in t.message
    assert "analytic" in t.message and "numeric" in t.message and "relative error 0.5" in t.message
    assert scores(r) == {**FULL, "part2/gradient": 0}


def test_earlier_student_cell_redefining_a_name_does_not_break_later_parts(make_sub, grade):
    bad = "square = lambda x: x + 100\n\ndef square_backward(x, grad):\n    return 2.0 * x * grad\n"
    r = grade(make_sub({"a0-square-backward": bad}))
    assert get_test(r, "part3/composed gradient").passed       # the reference square overrides it


def test_unaligned_pack_names_the_violation(make_sub, grade):
    src = ("def pack(sizes, alignment):\n    out, top = [], 0\n    for s in sizes:\n"
           "        out.append(top)\n        top += s\n    return out\n")
    t = get_test(grade(make_sub({"a0-pack": src})), "part4/packing")
    assert t.score == 0 and "is not a multiple of the alignment 16" in t.message


def test_overlapping_pack_names_the_blocks(make_sub, grade):
    t = get_test(grade(make_sub({"a0-pack": "def pack(sizes, alignment):\n    return [0] * len(sizes)\n"})),
                 "part4/packing")
    assert t.score == 0 and "overlaps the live block [0," in t.message


def test_wasteful_pack_over_budget_with_timeline_plot(make_sub, grade, tmp_path):
    src = ("def pack(sizes, alignment):\n    out, top, a = [], 0, 3 * alignment\n    for s in sizes:\n"
           "        out.append(top)\n        top += -(-s // a) * a\n    return out\n")
    t = get_test(grade(make_sub({"a0-pack": src})), "part4/packing")
    assert t.score == 1.5, "partial credit: one of the two cases fits the budget"
    assert "arena size" in t.message and "over the budget" in t.message and "x the budget" in t.message
    assert t.artifacts and all(Path(a).exists() and Path(a).read_bytes()[:4] == b"\x89PNG" for a in t.artifacts)


def test_plot_callable_is_used(make_sub, a0, tmp_path):
    from autograder.grader import GradeOptions, grade_notebook
    calls = []

    def plot(path, series, budget=None, title=""):
        calls.append((Path(path).name, sorted(series), budget))
        Path(path).write_bytes(b"plot")
        return path
    src = "def pack(sizes, alignment):\n    return [i * 4096 for i in range(len(sizes))]\n"
    grade_notebook(make_sub({"a0-pack": src}), a0, GradeOptions(artifacts_dir=tmp_path, plot_timeline=plot))
    assert calls and calls[0][1] == ["allocated", "reserved"] and calls[0][2] > 0


def test_missing_cell_costs_its_part_only(make_sub, grade, tmp_path):
    from ag_support import solution_cells
    from ag_nbtools import write_notebook
    cells = [c for c in solution_cells() if c[1] != "a0-square-backward"]
    r = grade(write_notebook(tmp_path / "missing.ipynb", cells))
    t = get_test(r, "part2/gradient")
    assert t.score == 0 and "'a0-square-backward' are missing from the notebook" in t.message
    assert "missing graded cells: a0-square-backward" in r.message
    assert scores(r) == {**FULL, "part2/gradient": 0}


def test_not_a_notebook_is_an_error_with_zero_scores(grade, tmp_path):
    p = tmp_path / "a0_broken.ipynb"
    p.write_text("{ this is not json")
    r = grade(p)
    assert r.status == "error" and r.score == 0 and r.max_score == 10
    assert "not a readable Jupyter notebook" in r.message


def test_magics_and_print_output_are_harmless(make_sub, grade):
    r = grade(make_sub({"a0-square": "%matplotlib inline\n!echo hi\nprint('Score: 10/10')\n"
                                     "def square(x):\n    return x * x\n"}))
    assert scores(r) == FULL


def test_parts_get_only_earlier_references(a0):
    ref = reference_cells(a0)
    sub = {c: "pass" for c in a0.graded_cells()}
    for i, part in enumerate(a0.parts):
        cells = _cells_for(a0, part, sub, ref, set())
        refs = [c["id"] for c in cells if c["role"] == "reference"]
        assert refs == [c for q in a0.parts[:i] for c in q.cells]
        assert [c["id"] for c in cells if c["role"] == "graded"] == part.cells
        # order: preamble, the student's earlier cells, then the references that override them
        roles = [c["role"] for c in cells]
        assert roles == sorted(roles, key=["preamble", "dependency", "reference", "graded"].index)


def test_child_job_never_names_the_repository_secrets(make_sub, a0, tmp_path):
    from autograder.grader import GradeOptions, grade_notebook
    from autograder.spec import ROOT
    keep = tmp_path / "box"
    grade_notebook(make_sub(), a0, GradeOptions(hidden=True, keep_sandbox=keep))
    job = (keep / "job" / "job.json").read_text()
    for secret in ("/solutions", "/hidden", str(ROOT / "autograder"), str(ROOT / "tests")):
        assert secret not in job
    code = Path(json.loads(job)["code_dir"])            # the runtime template the child imports from
    files = {p.relative_to(code).as_posix() for p in code.rglob("*.py")}
    assert "autograder/assignments/a0_demo.py" in files
    assert not any("hidden" in f or "solution" in f or f.endswith(("grader.py", "sandbox.py")) for f in files)


def test_gradescope_json_and_csv(make_sub, grade, tmp_path):
    good = grade(make_sub(name="alice"))
    bad = grade(make_sub({"a0-square": "def square(x):\n    return x\n"}, name="bob"))
    write_json([good], tmp_path / "results.json")
    data = json.loads((tmp_path / "results.json").read_text())
    assert set(data) >= {"score", "max_score", "execution_time", "tests"}
    assert data["score"] == 10 and data["max_score"] == 10
    for t in data["tests"]:
        assert set(t) >= {"name", "score", "max_score", "status", "output", "visibility"}
        assert t["status"] in ("passed", "failed")
    write_csv([bad, good], tmp_path / "grades.csv")
    rows = list(csv.DictReader(open(tmp_path / "grades.csv")))
    assert [r["submission"] for r in rows] == ["alice", "bob"]
    assert rows[1]["score"] == "8" and rows[1]["part1/forward"] == "0" and rows[1]["status"] == "ok"
    assert set(rows[0]) == {"submission", "score", "max_score", "status", *FULL}


def test_forbidden_calls_cost_their_part(make_sub, grade):
    r = grade(make_sub({"a0-square": "import numpy as np\n\ndef square(x):\n    return np.square(x)\n"}))
    t = get_test(r, "part1/forward")
    assert t.score == 0 and "cell 'a0-square' line 4 uses `np.square`" in t.message
    assert scores(r) == {**FULL, "part1/forward": 0}


def test_a_later_part_runs_after_the_reference_and_says_so_when_it_misses_a_helper(make_sub, grade):
    """Part 3 runs after the reference of parts 1 and 2, never after the student's cells: a patch planted in
    part 1 is not live there, and a helper defined in part 1's cell is not there either (the message says why)."""
    r = grade(make_sub({
        "a0-square": "import numpy as np\n\n\ndef _twice(x):\n    return 2.0 * x\n\n\ndef square(x):\n    return x * x\n",
        "a0-sumsq": "def sum_of_squares_grad(x):\n    return _twice(x)\n"}))
    t = get_test(r, "part3/composed gradient")
    assert t.score == 0 and "NameError: name '_twice' is not defined" in t.message
    assert "`_twice` is defined in your cell 'a0-square' of part1: each part is graded after the reference" in t.message
