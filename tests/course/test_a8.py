"""Assignment a8 (the modes of differentiation): the solution scores 100 % (with hidden cases: beside the hostile
corpus in tests/autograder/test_hostile_course.py), the generated handout 0 with a "not implemented" message
per test, planted bugs score partially with feedback that names the mistake, and a broken part never cascades
(parts 2 and 3 run on the reference's earlier parts). Planted bugs live in a8_variants/."""
from pathlib import Path

import nbformat
import pytest

from autograder.generate import render, student_notebook
from autograder.grader import GradeOptions, grade_notebook
from autograder.spec import ROOT, load_assignment
from course_support import (check_planted, execute_notebook, forbidden_hits, grade_planted, result_of, scores,
                            solution_with)

SOLUTION = ROOT / "solutions" / "a8_autodiff_modes.ipynb"
STUDENT = ROOT / "assignments" / "a8_autodiff_modes.ipynb"
VARIANTS = Path(__file__).resolve().parent / "a8_variants"

FULL = {"part1/arithmetic": 8, "part1/exp": 2, "part1/log": 2, "part1/sin": 2, "part1/matmul": 8,
        "part1/softmax": 8, "part1/sum": 4, "part1/jvp of a composed function": 6,
        "part2/first derivatives": 6, "part2/second derivatives (gradgradcheck)": 18,
        "part2/a gradient penalty through Tanh": 6,
        "part3/H v of hidden functions": 14, "part3/H v of an MLP's loss": 8, "part3/H v at 20,000 dims": 8}


@pytest.fixture(scope="module")
def a8():
    return load_assignment("a8")


def grade(a8, path, **opts):
    return grade_notebook(path, a8, GradeOptions(**opts))


def test_spec_parts_cells_hidden_cases_and_forbidden_uses(a8):
    assert {f"{p.id}/{t.name}": t.points for p in a8.parts for t in p.tests} == FULL and a8.max_score == 100
    nb = nbformat.read(SOLUTION, as_version=4)
    assert [c.metadata["grader"]["id"] for c in nb.cells if "grader" in c.metadata] == a8.graded_cells()
    assert nb.metadata["grader"]["assignment"] == "a8"
    assert {f"{p}/{t}" for p, t in a8.hidden_cases()} == set(FULL), "every test has hidden cases"
    for src in ("import minigrad.autograd.forward_ad as fwAD", "from minigrad.func import hessian",
                "h = mg.func.jvp(f, (x,), (v,))", "y = x.logsumexp(1)", "from minigrad.ops.nn.activation import Tanh",
                "mg.autograd.gradgradcheck(f, (x,))", "import torch", "y = mg.tanh(x)", "F.softplus(x)"):
        assert forbidden_hits(a8, src), src
    for src in ("g, = mg.autograd.grad(y, x, create_graph=True)", "np.tanh(x)", "x.exp()", "grad.unsqueeze(1)",
                "np.logaddexp(0.0, x)"):
        assert not forbidden_hits(a8, src), src
    assert not any(forbidden_hits(a8, c.source) for c in nb.cells if "grader" in c.metadata)


def test_student_notebook_is_generated_and_scores_zero(a8, tmp_path):
    nb = nbformat.read(SOLUTION, as_version=4)
    assert STUDENT.read_bytes() == render(student_notebook(nb, "a8_autodiff_modes")), \
        "assignments/a8_autodiff_modes.ipynb is stale: run `make assignments`"
    text = STUDENT.read_text()
    assert "BEGIN SOLUTION" not in text and "(s * x.tangent).sum" not in text and "(g * v).sum()" not in text
    path = tmp_path / "a8_autodiff_modes.ipynb"
    path.write_bytes(STUDENT.read_bytes())
    r = grade(a8, path, hidden=True)
    assert r.score == 0 and r.max_score == 100 and r.status == "ok"
    cell = {"part1": "a8-dual", "part2": "a8-twice", "part3": "a8-hvp"}
    for t in r.tests:
        c = cell[t.key.split("/")[0]]
        assert t.message.startswith("not implemented yet: this part is not started (its cells ") and \
            f"'{c}'" in t.message and "still raise NotImplementedError" in t.message, (t.key, t.message)


# variant file -> (the scores that differ from full marks, substrings of the failed tests' feedback)
PLANTED = {
    "mul_product_rule_missing": (
        {"part1/arithmetic": 8 * 5 / 7, "part1/jvp of a composed function": 0},
        {"part1/arithmetic": ["Dual(2, 3) * Dual(2, 3): tangent", "only da * b: the product rule also adds a * db"]}),
    "softmax_not_centered": (
        {"part1/softmax": 0, "part1/jvp of a composed function": 0},
        {"part1/softmax": ["softmax(Dual(3, 5), dim=1): tangent", "s * (da - sum(s * da, dim, keepdims=True))"]}),
    "matmul_one_term": (
        {"part1/matmul": 2},
        {"part1/matmul": ["Dual(3, 4) @ Dual(4, 2): tangent", "only dA @ B: the tangent of A @ B is dA @ B + A @ dB"]}),
    "tanh_vjp_from_arrays": (
        {"part2/second derivatives (gradgradcheck)": 18 * 4 / 5, "part2/a gradient penalty through Tanh": 0},
        {"part2/second derivatives (gradgradcheck)": ["Tanh: the second derivative d<grad, w>/dx",
                                                      "it is 0 everywhere", "cut from x's graph"]}),
    "softplus_vjp_sign": (
        {"part2/second derivatives (gradgradcheck)": 18 * 4 / 5},
        {"part2/second derivatives (gradgradcheck)": ["Softplus: the second derivative", "opposite sign"]}),
    "hvp_returns_gradient": (
        {"part3/H v of hidden functions": 0, "part3/H v of an MLP's loss": 0, "part3/H v at 20,000 dims": 0},
        {"part3/H v of an MLP's loss": ["you returned the gradient itself", "create_graph=True"]}),
    "hvp_without_create_graph": (
        {"part3/H v of hidden functions": 0, "part3/H v of an MLP's loss": 0, "part3/H v at 20,000 dims": 0},
        {"part3/H v of hidden functions": ["does not require grad", "<cell a8-hvp>"]}),
}


def test_every_variant_file_is_tested():
    assert {p.stem for p in VARIANTS.glob("*.py")} == set(PLANTED)


def test_planted_bugs_score_partially_and_name_the_bug(a8, tmp_path):
    """Variants in different parts share a submission (course_support.grade_planted): each costs only its part."""
    graded = grade_planted(a8, SOLUTION, VARIANTS, sorted(PLANTED), tmp_path, lambda path: grade(a8, path))
    for variant, (changed, feedback) in PLANTED.items():
        result, parts = graded[variant]
        check_planted(variant, result, parts, FULL, changed, feedback)


def test_broken_parts_cost_only_themselves(a8, tmp_path):
    broken = {"a8-dual": "raise RuntimeError('half-written cell')\n",
              "a8-twice": "from minigrad.ops.nn.activation import Tanh\n"}
    r = grade(a8, solution_with(SOLUTION, tmp_path / "broken.ipynb", broken))
    got = scores(r)
    assert all(got[k] == 0 for k in FULL if k.startswith(("part1/", "part2/")))
    assert {k: v for k, v in got.items() if k.startswith("part3/")} == \
        {k: v for k, v in FULL.items() if k.startswith("part3/")}, "part 3 uses the reference parts 1-2"
    assert "RuntimeError in cell 'a8-dual': half-written cell" in result_of(r, "part1/arithmetic").message
    assert "cell 'a8-twice' line 1 uses" in result_of(r, "part2/first derivatives").message


@pytest.mark.notebook
def test_solution_notebook_executes_and_self_checks_pass():
    outputs, text = execute_notebook(SOLUTION, timeout=120)
    assert not [o for o in outputs if o.output_type == "error"]
    for part, pts in (("part1", 40), ("part2", 30), ("part3", 30)):
        assert f"a8 {part}: {pts}/{pts} points on the public tests" in text
    assert "gradgradcheck(Tanh): True" in text and "step 5: |grad|" in text
    assert sum("image/png" in o.get("data", {}) for o in outputs if o.output_type == "display_data") >= 1


def test_the_handout_announces_the_specs_points_and_points_at_real_files(a8):
    import re
    nb = nbformat.read(SOLUTION, as_version=4)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    rows = {int(k): int(p) for k, p in re.findall(r"^\| (\d) \|.*\| (\d+) \|$", text, re.M)}
    assert rows == {k: int(p.points) for k, p in enumerate(a8.parts, 1)}
    for k, part in enumerate(a8.parts, 1):
        assert re.search(rf"^## Part {k} .*\({int(part.points)} points\)", text, re.M), part.id
    lecture = nbformat.read(ROOT / "lectures" / "10_differentiation_modes.ipynb", as_version=4)
    files = set(re.findall(r"minigrad/[\w/]+\.py", "\n".join(c.source for c in lecture.cells)))
    assert files and all((ROOT / f).exists() for f in files), files
