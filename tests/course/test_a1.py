"""Assignment a1 (autograd): the solution scores 100 %, the generated student notebook 0 with a "not
implemented" message per test, planted bugs score partially with feedback that names where the bug
is, and an early part's failure never cascades into later parts.

Planted bugs live in a1_variants/, one file per bug: graded cells in the ``# %% [cell-id]`` format
(whole cells, or patches of the solution's cells: see course_support.py).
"""
import time
from pathlib import Path

import nbformat
import pytest

from autograder import check
from autograder.forbidden import forbidden_uses
from autograder.generate import render, student_notebook
from autograder.grader import GradeOptions, grade_notebook
from autograder.spec import ROOT, load_assignment
from course_support import check_planted, grade_planted, result_of, scores, solution_with as _solution_with

SOLUTION = ROOT / "solutions" / "a1_autograd.ipynb"
STUDENT = ROOT / "assignments" / "a1_autograd.ipynb"
VARIANTS = Path(__file__).resolve().parent / "a1_variants"

FULL = {
    "part1/Mul": 4, "part1/Div": 4, "part1/Exp": 4, "part1/Log": 4, "part1/ReLU": 4,
    "part2/unbroadcast": 4, "part2/Sum": 5, "part2/MatMul": 5, "part2/Reshape": 2, "part2/Transpose": 2,
    "part2/Softmax": 4, "part2/LogSoftmax": 4, "part2/cross_entropy": 4,
    "part3/engine: diamond": 5, "part3/engine: reuse": 4, "part3/engine: broadcasting": 5,
    "part3/engine: deep chain": 4, "part3/engine: non-scalar output": 3, "part3/engine: accumulation": 4,
    "part3/numerical_grad": 5,
    "part4/im2col": 5, "part4/col2im": 5, "part4/Conv2d forward": 4, "part4/Conv2d backward": 6,
}
PART_POINTS = {"part1": 20, "part2": 30, "part3": 30, "part4": 20}


@pytest.fixture(scope="module")
def a1():
    return load_assignment("a1")


def solution_with(path, overrides):
    return _solution_with(SOLUTION, path, overrides)


def grade(a1, path, **opts):
    return grade_notebook(path, a1, GradeOptions(**opts))


def solution_namespace():
    """The solution's graded cells run in one namespace (what a student's notebook holds)."""
    ns = {}
    exec("import numpy as np\nimport minigrad as mg\nfrom minigrad import Tensor\n"
         "from minigrad.autograd import Function\n", ns)
    nb = nbformat.read(SOLUTION, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.metadata.get("grader", {}).get("id"):
            exec(compile(cell.source, f"<{cell.metadata['grader']['id']}>", "exec"), ns)
    return ns


# ---- the spec --------------------------------------------------------------------------------------------
def test_spec_parts_points_and_cells(a1):
    assert {t.name: t.points for p in a1.parts for t in p.tests} == {k.split("/", 1)[1]: v for k, v in FULL.items()}
    assert {p.id: p.points for p in a1.parts} == PART_POINTS and a1.max_score == 100
    nb = nbformat.read(SOLUTION, as_version=4)
    ids = [c.metadata["grader"]["id"] for c in nb.cells if "grader" in c.metadata]
    assert ids == a1.graded_cells(), "graded cells appear in the notebook in part order"
    for c in nb.cells:
        if "grader" in c.metadata:
            assert "### BEGIN SOLUTION" in c.source, f"{c.metadata['grader']['id']} has nothing for the student to write"
    assert nb.metadata["grader"]["assignment"] == "a1"
    hidden = a1.hidden_cases()
    assert {f"{p}/{t}" for p, t in hidden} == set(FULL), "every test has hidden cases"


def test_spec_forbids_minigrads_implementations_but_not_function_and_tensor(a1):
    def forbidden(src):
        return forbidden_uses(src, a1.forbidden, a1.preamble)
    for src in ("from minigrad.ops.elementwise import Exp", "import minigrad.nn.functional as F",
                "from minigrad.autograd.engine import topological_order", "mg.autograd.backward(out)",
                "from minigrad.autograd import Function, backward", "y = F.conv2d(x, w)",
                "return mg.exp(x)", "logits.log_softmax(1)", "from minigrad import nn", "import torch"):
        assert forbidden(src), src
    for src in ("from minigrad.autograd import Function", "from minigrad import Tensor", "np.exp(x)",
                "def topological_order(root):", "leaf.grad = Tensor(g.copy())", "LogSoftmax.apply(x, dim=1)",
                "mg.tensor([1.0])", "node.backward(node, g)"):
        assert not forbidden(src), src
    sol = nbformat.read(SOLUTION, as_version=4)
    assert not any(forbidden(c.source) for c in sol.cells if "grader" in c.metadata)


# ---- the solution --------------------------------------------------------------------------------------------

# (the solution's full marks, hidden cases on, are checked beside the hostile corpus: tests/autograder/test_hostile_course.py)


def test_self_check_in_process_passes_on_the_solution(capsys):
    ns = solution_namespace()
    for part, pts in PART_POINTS.items():
        res = check("a1", part, namespace=ns)
        assert res and res.score == pts, capsys.readouterr().out
    assert "a1 part3: 30/30 points on the public tests" in capsys.readouterr().out


@pytest.mark.notebook
def test_solution_notebook_executes_and_self_checks_pass(tmp_path):
    from nbclient import NotebookClient
    nb = nbformat.read(SOLUTION, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(f"import sys; sys.path.insert(0, {str(ROOT)!r})"))
    t0 = time.monotonic()
    NotebookClient(nb, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(SOLUTION.parent)}}).execute()
    assert time.monotonic() - t0 < 60
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs)
    for part, pts in PART_POINTS.items():
        assert f"a1 {part}: {pts}/{pts} points on the public tests" in text
    assert "FAIL" not in text and "not implemented" not in text


# ---- the student notebook -------------------------------------------------------------------------------------
def test_student_notebook_is_generated_from_the_solution():
    nb = nbformat.read(SOLUTION, as_version=4)
    assert STUDENT.read_bytes() == render(student_notebook(nb, "a1_autograd")), \
        "assignments/a1_autograd.ipynb is stale: run `make assignments`"
    text = STUDENT.read_text()
    assert "BEGIN SOLUTION" not in text and "np.swapaxes(a, -1, -2) @ grad" not in text


def test_generated_notebook_scores_zero_and_says_not_started_once_per_part(a1, tmp_path):
    from autograder.results import format_report
    path = tmp_path / "a1_autograd.ipynb"
    path.write_bytes(render(student_notebook(nbformat.read(SOLUTION, as_version=4), "a1_autograd")))
    r = grade(a1, path)
    assert r.score == 0 and r.max_score == 100 and r.status == "ok"
    for t in r.tests:
        cells = ", ".join(f"'{c}'" for c in a1.part(t.part).cells)
        assert t.message == f"not implemented yet: this part is not started (its cells {cells} still raise " \
                            f"NotImplementedError)", (t.key, t.message)
    report = format_report(r)
    assert report.count("this part is not started") == len(PART_POINTS), report


def test_engine_messages_name_the_students_op_and_input(a1, tmp_path):
    """minigrad's engine says "relu" and "input 1"; the feedback says ReLU and `b`, as the student wrote."""
    bad = {"a1-relu": "class ReLU(Function):\n    @staticmethod\n    def forward(ctx, x):\n"
                      "        ctx.save_for_backward(x > 0)\n        return x * (x > 0)\n\n"
                      "    @staticmethod\n    def backward(ctx, grad):\n        mask, = ctx.saved_tensors\n"
                      "        return (grad * mask).astype(np.float32)\n",
           "a1-mul": "class Mul(Function):\n    @staticmethod\n    def forward(ctx, a, b):\n"
                     "        ctx.save_for_backward(a, b)\n        return a * b\n\n"
                     "    @staticmethod\n    def backward(ctx, grad):\n        a, b = ctx.saved_tensors\n"
                     "        return grad * b, (grad * a).ravel()\n"}
    r = grade(a1, solution_with(tmp_path / "names.ipynb", bad))
    relu, mul = result_of(r, "part1/ReLU").message, result_of(r, "part1/Mul").message
    assert relu.count("ReLU: ") and "`x`" in relu and "relu:" not in relu and "input 0" not in relu, relu
    assert "Mul: " in mul and "`b`" in mul and "input 1" not in mul, mul


# ---- planted bugs -----------------------------------------------------------------------------------------------
# variant file -> (the scores that differ from full marks, substrings of the first failed test's feedback)
PLANTED = {
    "exp_backward_missing_factor": (
        {"part1/Exp": 0},
        {"part1/Exp": ["Exp: backward: gradient w.r.t. `x` wrong at index", "analytic", "numeric",
                       "relative error"]}),
    "sum_keepdim_false": (
        {"part2/Sum": 3.0},   # full sums and keepdim=True pass by luck: 3 of 5 cases
        {"part2/Sum": ["x=(3, 3), dim=1, keepdim=False", "Sum: backward: gradient w.r.t. `x` wrong at index"]}),
    "softmax_without_max": (
        {"part2/Softmax": 4 * 2 / 3, "part2/LogSoftmax": 4 * 2 / 3},
        {"part2/Softmax": ["scale=1000.0", "Softmax: forward: output is nan at index"],
         "part2/LogSoftmax": ["scale=1000.0", "LogSoftmax: forward: output is -inf at index"]}),
    "engine_without_topological_order": (
        {"part3/engine: diamond": 0, "part3/engine: reuse": 0, "part3/engine: broadcasting": 0,
         "part3/engine: deep chain": 0, "part3/engine: non-scalar output": 0},
        {"part3/engine: diamond": ["backward (diamond graph): gradient w.r.t. `x` wrong at index", "analytic"],
         "part3/engine: deep chain": ["backward (chain graph): gradient w.r.t. `x`"]}),
    "engine_recursive_sort": (
        {"part3/engine: deep chain": 0},
        {"part3/engine: deep chain": ["n=1200", "RecursionError", "cell a1-engine", "in topological_order"]}),
    "engine_overwrites_grad": (
        {"part3/engine: accumulation": 0},
        {"part3/engine: accumulation": ["after a second backward() on another graph",
                                        "backward: gradient w.r.t. `x` wrong at index"]}),
    "im2col_padding_off_by_one": (
        {"part4/im2col": 5 / 3, "part4/Conv2d forward": 4 / 3, "part4/Conv2d backward": 2.0},
        {"part4/im2col": ["padding=1", "im2col: output has shape (32, 27), expected (50, 27)"],
         "part4/Conv2d forward": ["padding=1", "conv2d"]}),
}


def test_every_variant_file_is_tested():
    assert {p.stem for p in VARIANTS.glob("*.py")} == set(PLANTED)


def test_planted_bugs_score_partially_and_name_their_location(a1, tmp_path):
    """Variants in different parts share a submission (course_support.grade_planted): each costs only its part."""
    graded = grade_planted(a1, SOLUTION, VARIANTS, sorted(PLANTED), tmp_path, lambda path: grade(a1, path))
    for variant, (changed, feedback) in PLANTED.items():
        result, parts = graded[variant]
        check_planted(variant, result, parts, FULL, changed, feedback)
        assert 0 < result.score < result.max_score


# ---- no cascading -------------------------------------------------------------------------------------------------
BROKEN_PART1 = {
    "a1-mul": "class Mul(Function):\n    @staticmethod\n    def forward(ctx, a, b):\n        return a + b\n\n"
              "    @staticmethod\n    def backward(ctx, grad):\n        return grad, grad\n",
    "a1-div": "class Div(Function):\n    pass\n",
    "a1-exp": "raise RuntimeError('half-written cell')\n",
    "a1-log": "def Log(x):\n    return x\n",
    "a1-relu": "class ReLU(Function):\n    @staticmethod\n    def forward(ctx, x):\n        raise NotImplementedError\n",
}


def test_broken_part1_does_not_cascade(a1, tmp_path):
    r = grade(a1, solution_with(tmp_path / "broken_part1.ipynb", BROKEN_PART1))
    got = scores(r)
    assert all(got[k] == 0 for k in FULL if k.startswith("part1/")), got
    assert {k: v for k, v in got.items() if not k.startswith("part1/")} == \
        {k: v for k, v in FULL.items() if not k.startswith("part1/")}, "parts 2-4 use the reference part 1"
    assert "RuntimeError in cell 'a1-exp': half-written cell" in result_of(r, "part1/Exp").message
    assert "Mul: forward: output wrong at index" in result_of(r, "part1/Mul").message


def test_broken_engine_does_not_cascade_into_conv(a1, tmp_path):
    bad = {"a1-engine": "def topological_order(root):\n    return []\n\n"
                        "def backward(output, grad=None):\n    raise ValueError('oops')\n",
           "a1-unbroadcast": "def unbroadcast(grad, shape):\n    return grad\n"}
    r = grade(a1, solution_with(tmp_path / "broken_engine.ipynb", bad))
    got = scores(r)
    assert got["part2/unbroadcast"] == 0     # only the identity case passes: a do-nothing answer earns nothing
    assert all(got[k] == 0 for k in FULL if k.startswith("part3/engine"))
    assert got["part3/numerical_grad"] == 5
    assert all(got[k] == FULL[k] for k in FULL if k.startswith(("part1/", "part4/")))


# ---- what the spec refuses ----------------------------------------------------------------------------------------
def test_importing_minigrads_op_costs_its_part(a1, tmp_path):
    src = "from minigrad.ops.elementwise import Exp\n"
    r = grade(a1, solution_with(tmp_path / "copied.ipynb", {"a1-exp": src}))
    got = scores(r)
    assert all(got[k] == 0 for k in FULL if k.startswith("part1/"))
    assert "cell 'a1-exp' line 1 uses `minigrad.ops`" in result_of(r, "part1/Mul").message
    assert r.score == 80
    from autograder.results import format_report
    assert format_report(r).count("uses `minigrad.ops`") == 1, "said once for the part, not under every test"


def test_engine_that_calls_minigrads_engine_gets_no_credit(a1, tmp_path):
    src = ("def backward(output, grad=None):\n"
           "    output.backward(None if grad is None else Tensor(grad))\n")
    r = grade(a1, solution_with(tmp_path / "delegates.ipynb", {"a1-engine": src}))
    got = scores(r)
    assert all(got[k] == 0 for k in FULL if k.startswith("part3/")), got     # the whole part: it reached a stub
    assert ("cell 'a1-engine' line 2 uses `minigrad.autograd.engine.backward` (reached at run time), which this "
            "assignment asks you to write yourself") in result_of(r, "part3/engine: diamond").message
    assert r.score == 100 - 30


def test_numerical_grad_in_float32_or_in_place_is_caught(a1, tmp_path):
    in_place_f32 = ("def numerical_grad(f, x, eps=1e-6):\n"
                    "    g = np.zeros(x.shape)\n"
                    "    for i in np.ndindex(x.shape):\n"
                    "        old = x[i]\n"
                    "        x[i] = old + eps; hi = f(x)\n"
                    "        x[i] = old - eps; lo = f(x)\n"
                    "        g[i] = (hi - lo) / (2 * eps)\n"
                    "    return g\n")
    r = grade(a1, solution_with(tmp_path / "numgrad.ipynb", {"a1-numgrad": in_place_f32}))
    t = result_of(r, "part3/numerical_grad")
    assert t.score == 0 and "numerical_grad changed the caller's array x" in t.message
    restores = in_place_f32.replace("        g[i] =", "        x[i] = old\n        g[i] =")
    t = result_of(grade(a1, solution_with(tmp_path / "numgrad32.ipynb", {"a1-numgrad": restores})),
                "part3/numerical_grad")
    assert t.score == pytest.approx(5 * 2 / 3, abs=1e-3) and "x is float32: perturb a float64 copy" in t.message
