"""The student-notebook generator."""
import copy
from pathlib import Path

import nbformat
import pytest

from autograder.generate import GenerateError, main, render, strip_solutions, student_notebook
from ag_support import FIXTURES, FULL, SOLUTION_NB, SOLUTION_SCRIPT
from ag_nbtools import cells_from_script, make_notebook

GENERATED = FIXTURES / "generated"


def test_strip_keeps_indentation_and_code_around():
    src = "def f(x):\n    y = 1\n    ### BEGIN SOLUTION\n    return x + y\n    ### END SOLUTION\n    return y\n"
    out = strip_solutions(src, "cell-f")
    assert out == ('def f(x):\n    y = 1\n    # YOUR CODE HERE\n'
                   '    raise NotImplementedError("cell-f: replace this line with your code")\n    return y\n')
    compile(out, "x", "exec")


def test_strip_several_regions_and_markdown():
    src = "### BEGIN SOLUTION\na = 1\n### END SOLUTION\nb = 2\n\tif b:\n\t\t### BEGIN SOLUTION\n\t\tc\n\t\t### END SOLUTION"
    out = strip_solutions(src, "c")
    assert out.count("raise NotImplementedError") == 2 and "\t\traise" in out and "a = 1" not in out
    assert strip_solutions("Why?\n### BEGIN SOLUTION\nBecause.\n### END SOLUTION", "m", markdown=True) == \
        "Why?\nYOUR ANSWER HERE"


@pytest.mark.parametrize("src", ["### BEGIN SOLUTION\nx", "x\n### END SOLUTION",
                                 "### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION"])
def test_unbalanced_markers_are_errors(src):
    with pytest.raises(GenerateError):
        strip_solutions(src, "bad")


def test_outputs_cleared_metadata_kept_deterministic():
    nb = nbformat.read(str(SOLUTION_NB), as_version=4)
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", text="hello")]
    nb.cells[1].execution_count = 7
    nb.cells[1].metadata["grader"] = {"id": "extra", "solution_only": True}
    before = copy.deepcopy(nb)
    out = student_notebook(nb, "a0_demo")
    assert nb == before, "the input notebook is not modified"
    assert all(c.get("outputs", []) == [] and c.get("execution_count") is None
               for c in out.cells if c.cell_type == "code")
    assert "extra" not in [c.metadata.get("grader", {}).get("id") for c in out.cells]
    ids = [c.metadata["grader"]["id"] for c in out.cells if "grader" in c.metadata]
    assert ids == ["a0-square", "a0-square-backward", "a0-sumsq", "a0-pack"]
    assert out.metadata["grader"]["assignment"] == "a0"
    assert "BEGIN SOLUTION" not in render(out).decode()
    assert render(student_notebook(nb, "a0_demo")) == render(out)


def test_missing_cell_ids_get_stable_ones():
    nb = make_notebook([("code", None, "x = 1")])
    del nb.cells[0]["id"]
    nb.nbformat_minor = 4
    assert render(student_notebook(nb)) == render(student_notebook(nb))


def test_check_mode(tmp_path):
    assert main(FIXTURES / "solutions", GENERATED, check=True) == 0
    dst = tmp_path / "assignments"
    assert main(FIXTURES / "solutions", dst, check=True) == 1      # missing
    assert main(FIXTURES / "solutions", dst) == 0
    assert (dst / "a0_demo.ipynb").read_bytes() == (GENERATED / "a0_demo.ipynb").read_bytes()
    assert main(FIXTURES / "solutions", dst, check=True) == 0
    (dst / "a0_demo.ipynb").write_bytes((dst / "a0_demo.ipynb").read_bytes().replace(b"YOUR CODE", b"MY CODE"))
    assert main(FIXTURES / "solutions", dst, check=True) == 1      # edited by hand
    (dst / "a0_demo.ipynb").unlink()
    (dst / "a1_orphan.ipynb").write_text("{}")
    assert main(FIXTURES / "solutions", dst, check=True) == 1


def test_solution_fixture_matches_its_script():
    nb = nbformat.read(str(SOLUTION_NB), as_version=4)
    assert [(c.cell_type, c.metadata.get("grader", {}).get("id"), c.source) for c in nb.cells] == \
        [(t, i, s) for t, i, s in cells_from_script(SOLUTION_SCRIPT.read_text())]


def test_generated_notebook_scores_zero_with_not_implemented(grade):
    r = grade(GENERATED / "a0_demo.ipynb")
    assert r.score == 0 and r.max_score == sum(FULL.values()) and r.status == "ok"
    for t in r.tests:
        assert "not implemented yet: this part is not started (its cells" in t.message


def test_every_handout_ends_with_how_to_submit_and_what_is_forbidden():
    """The forbidden names come from the spec: a student reads them in the handout, not from a 0."""
    nb = nbformat.read(str(GENERATED / "a0_demo.ipynb"), as_version=4)
    last = nb.cells[-1].source
    assert last.startswith("## Submitting") and "`work/a0_demo.ipynb`" in last and "make grade A=a0" in last
    assert "**Not allowed in graded cells:** `numpy.square`" in last
    repo = Path(__file__).resolve().parents[2]
    a6 = nbformat.read(str(repo / "assignments" / "a6_data_parallel.ipynb"), as_version=4).cells[-1].source
    assert "make start A=a6" in a6 and "**Not allowed in graded cells:** `minigrad.distributed`" in a6
