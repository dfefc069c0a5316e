"""Assignment a7 (fusion and FlashAttention): the solution scores 100 %, the generated student notebook 0
with a "not implemented" message per test, planted bugs score partially with feedback that names the bug,
and a broken early part never cascades into later parts. Planted bugs live in a7_variants/."""
import time
from pathlib import Path

import nbformat
import pytest

from autograder.generate import render, student_notebook
from autograder.grader import GradeOptions, grade_notebook
from autograder.spec import ROOT, load_assignment
from course_support import cell_overrides, forbidden_hits, result_of, scores, solution_with as _solution_with

SOLUTION = ROOT / "solutions" / "a7_fusion.ipynb"
STUDENT = ROOT / "assignments" / "a7_fusion.ipynb"
VARIANTS = Path(__file__).resolve().parent / "a7_variants"

FULL = {"part1/find_chains": 20, "part2/fused values": 10, "part2/fused gradients": 10, "part2/fused memory": 10,
        "part3/attention forward": 15, "part3/attention backward": 20, "part3/attention memory": 15}


@pytest.fixture(scope="module")
def a7():
    return load_assignment("a7")


def grade(a7, path, **opts):
    return grade_notebook(path, a7, GradeOptions(**opts))


def solution_with(path, overrides):
    return _solution_with(SOLUTION, path, overrides)


def test_spec_parts_cells_hidden_cases_and_forbidden_uses(a7):
    assert {f"{p.id}/{t.name}": t.points for p in a7.parts for t in p.tests} == FULL and a7.max_score == 100
    nb = nbformat.read(SOLUTION, as_version=4)
    assert [c.metadata["grader"]["id"] for c in nb.cells if "grader" in c.metadata] == a7.graded_cells()
    assert nb.metadata["grader"]["assignment"] == "a7"
    assert {f"{p}/{t}" for p, t in a7.hidden_cases()} == set(FULL), "every test has hidden cases"

    def forbidden(src):         # the grader's check: the rules on the syntax tree, after the preamble
        return bool(forbidden_hits(a7, src))
    for src in ("from minigrad.compiler.fusion import find_chains", "from minigrad.compiler import fuse",
                "y = mg.compiler.api.compile(fn)(x)", "from minigrad.ops.nn.flash_attention import FlashAttention",
                "F.scaled_dot_product_attention(q, k, v)", "import torch", "FusedElementwise.apply(x)",
                "y = mg.compile(fn)(x)", "@mg.compile\ndef f(x):\n    return x", "c = getattr(mg, 'compile')",
                "from minigrad import compile as c\nc(fn)", "import minigrad.compile as mc\ng = mc(fn)"):
        assert forbidden(src), src
    for src in ("from minigrad.compiler.fusion import fusible", "Node('call_op', FusedChain, args)",
                "np.exp(s - m_new)", "Graph(nodes, output)", "g = mg.compiler.ir.Graph(nodes, out)",
                "from minigrad.compiler.ir import Node", "import minigrad.compiler as mc\ng = mc.Graph(nodes, out)",
                "fn = graph.compile()"):
        assert not forbidden(src), src
    assert not any(forbidden(c.source) for c in nb.cells if "grader" in c.metadata)


def test_solution_scores_full_marks_with_hidden_cases_quickly(a7):
    t0 = time.monotonic()
    r = grade(a7, SOLUTION, hidden=True)
    assert scores(r) == FULL and r.status == "ok", r
    assert time.monotonic() - t0 < 60
    public = {f"{p.id}/{t.name}": len(t.cases) for p in a7.parts for t in p.tests}
    assert all(t.cases > public[t.key] for t in r.tests), "hidden cases are added to every test"


def test_student_notebook_is_generated_and_scores_zero(a7, tmp_path):
    nb = nbformat.read(SOLUTION, as_version=4)
    assert STUDENT.read_bytes() == render(student_notebook(nb, "a7_fusion")), \
        "assignments/a7_fusion.ipynb is stale: run `make assignments`"
    assert "BEGIN SOLUTION" not in STUDENT.read_text()
    path = tmp_path / "a7_fusion.ipynb"
    path.write_bytes(STUDENT.read_bytes())
    r = grade(a7, path)
    assert r.score == 0 and r.max_score == 100 and r.status == "ok"
    cell = {"part1": "a7-chains", "part2": "a7-fuse", "part3": "a7-flash"}
    for t in r.tests:
        c = cell[t.key.split('/')[0]]                   # said once for a part not started (the grader's wording)
        assert t.message.startswith("not implemented yet: this part is not started (its cells ") and \
            f"'{c}'" in t.message and "still raise NotImplementedError" in t.message, (t.key, t.message)


# variant file -> (the scores that differ from full marks, substrings of the failed tests' feedback)
PLANTED = {
    "fuses_across_reduction": (
        {"part1/find_chains": 12},
        {"part1/find_chains": ["contains `mean`", "a reduction", "cannot be computed block by block"]}),
    "chain_ignores_outside_readers": (
        {"part1/find_chains": 12},
        {"part1/find_chains": ["`tanh` (node 4) is read by `mean` outside it", "a chain must end there"]}),
    "kernel_without_blocks": (
        {"part2/fused memory": 0},
        {"part2/fused memory": ["peak temporaries", "> budget", "block buffer with out="]}),
    "no_running_max_rescale": (
        {"part3/attention forward": 7.5, "part3/attention backward": 20 / 3, "part3/attention memory": 0},
        {"part3/attention forward": ["Right with one key block, wrong with several", "rescaled by exp(m_old - m_new)"]}),
    "backward_through_mg_compile": (   # refused by the exact-name rule, not run: the whole part scores 0
        {"part2/fused values": 0, "part2/fused gradients": 0, "part2/fused memory": 0},
        {"part2/fused values": ["cell 'a7-fuse' line ", "uses `mg.compile`, which this assignment asks you to "
                                                       "write yourself"]}),
    "backward_without_D": (
        {"part3/attention backward": 0},
        {"part3/attention backward": ["FlashAttention: backward: gradient w.r.t. `q` wrong at index", "numeric"]}),
}


def test_every_variant_file_is_tested():
    assert {p.stem for p in VARIANTS.glob("*.py")} == set(PLANTED)


@pytest.mark.parametrize("variant", sorted(PLANTED))
def test_planted_bug_scores_partially_and_names_the_bug(a7, tmp_path, variant):
    changed, feedback = PLANTED[variant]
    path = solution_with(tmp_path / f"{variant}.ipynb", cell_overrides((VARIANTS / f"{variant}.py").read_text(),
                                                                       SOLUTION))
    r = grade(a7, path)
    assert r.status == "ok", r.message
    got = scores(r)
    assert got == pytest.approx({**FULL, **changed}, abs=1e-3), {k: v for k, v in got.items() if v != FULL[k]}
    for key, needles in feedback.items():
        msg = result_of(r, key).message
        for needle in needles:
            assert needle in msg, (key, needle, msg)


def test_broken_or_copied_parts_cost_only_themselves(a7, tmp_path):
    broken = {"a7-chains": "from minigrad.compiler.fusion import find_chains\n",   # copying the library's pass
              "a7-fuse": "raise RuntimeError('half-written cell')\n"}
    r = grade(a7, solution_with(tmp_path / "broken.ipynb", broken))
    got = scores(r)
    assert all(got[k] == 0 for k in FULL if k.startswith(("part1/", "part2/")))
    assert {k: v for k, v in got.items() if k.startswith("part3/")} == \
        {k: v for k, v in FULL.items() if k.startswith("part3/")}, "part 3 uses the reference parts 1-2"
    assert "cell 'a7-chains' line 1 uses" in result_of(r, "part1/find_chains").message
    assert "RuntimeError in cell 'a7-fuse': half-written cell" in result_of(r, "part2/fused values").message


@pytest.mark.notebook
def test_solution_notebook_executes_and_self_checks_pass():
    from nbclient import NotebookClient
    nb = nbformat.read(SOLUTION, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(f"import sys; sys.path.insert(0, {str(ROOT)!r})"))
    NotebookClient(nb, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(SOLUTION.parent)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs)
    for part, pts in (("part1", 20), ("part2", 30), ("part3", 50)):
        assert f"a7 {part}: {pts}/{pts} points on the public tests" in text
