"""check() from a notebook: public tests, in-process, on the notebook's own definitions."""
import pytest

from autograder import check
from autograder.spec import ROOT
from ag_support import SOLUTION_NB


def square(x):
    return x * x


def test_check_passes_on_callers_globals(capsys):
    r = check("a0", "part1")
    out = capsys.readouterr().out
    assert r and r.score == r.max_score == 2
    assert "a0 part1: 2/2 points on the public tests" in out and "self-check" in out


def test_check_reports_failures_and_missing_names(capsys):
    r = check("a0", "part2", namespace={"square_backward": lambda x, g: x * g})
    out = capsys.readouterr().out
    assert not r and "FAIL" in out and "analytic" in out and "numeric" in out
    r = check("a0", "part3", namespace={})
    assert not r and "does not define `sum_of_squares_grad`" in capsys.readouterr().out


def test_untouched_part_is_said_not_started_once(capsys):
    def todo(*args):
        raise NotImplementedError("a0-square: replace this line with your code")
    r = check("a0", "part1", namespace={"square": todo})
    out = capsys.readouterr().out
    assert not r and out.count("not started") == 1 and "not implemented yet" not in out, out


def test_check_as_a_cells_last_line_displays_nothing_more(capsys):
    r = check("a0", "part1")
    assert r._ipython_display_() is None and capsys.readouterr().out.count("points on the public tests") == 1


def test_check_survives_system_exit(capsys):
    import sys
    r = check("a0", "part1", namespace={"square": lambda x: sys.exit(1)})
    assert not r and "SystemExit" in capsys.readouterr().out


def test_check_unknown_part():
    with pytest.raises(KeyError, match="no part 'part9'"):
        check("a0", "part9", namespace={})


BORROWED = "import numpy as np\n\n\ndef square(x):\n    return np.square(x)\n"
GRADER_SAYS = "cell 'a0-square' line 5 uses `np.square`, which this assignment asks you to write yourself"


def test_check_scores_a_part_0_with_the_graders_words_on_a_forbidden_use(capsys):
    """The graded cell as last run (IPython's `In`) goes through the grader's forbidden scan first."""
    import numpy as np
    ns = {"In": ["", BORROWED, 'check("a0", "part1")'], "square": np.square}
    r = check("a0", "part1", namespace=ns)
    out = capsys.readouterr().out
    assert not r and r.score == 0 and r.max_score == 2, out
    assert GRADER_SAYS in out and "(0/2)" in out, out


def test_check_scan_reads_the_graded_cell_as_last_run_not_experiments(capsys):
    own = "def square(x):\n    return x * x\n"
    experiment = "import numpy as np\ny = np.square(np.arange(3))\nz = square(np.arange(3))\n"
    r = check("a0", "part1", namespace={"In": ["", BORROWED, own, experiment], "square": square})
    assert r and r.score == 2, capsys.readouterr().out      # rerun without np.square; experiments are free
    r = check("a0", "part1", namespace={"In": ["", own, BORROWED], "square": square})
    assert not r and GRADER_SAYS in capsys.readouterr().out


def test_grader_and_check_share_the_forbidden_words(make_sub, grade):
    from ag_support import get_test
    assert get_test(grade(make_sub({"a0-square": BORROWED})), "part1/forward").message == GRADER_SAYS


@pytest.mark.notebook
def test_check_in_a_real_kernel_sees_a_forbidden_use(tmp_path):
    """In a real kernel (nbclient), the notebook's own history feeds the scan."""
    import nbformat
    from nbclient import NotebookClient
    nb = nbformat.read(str(SOLUTION_NB), as_version=4)
    cell = next(c for c in nb.cells if c.get("metadata", {}).get("grader", {}).get("id") == "a0-square")
    cell.source = BORROWED
    nb.cells.insert(0, nbformat.v4.new_code_cell(f"import sys; sys.path.insert(0, {str(ROOT)!r})"))
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "a0 part1: 0/2 points on the public tests" in text and GRADER_SAYS in text, text
    assert "a0 part2: 3/3 points on the public tests" in text


@pytest.mark.notebook
def test_check_from_a_notebook_cell(tmp_path):
    import nbformat
    from nbclient import NotebookClient
    nb = nbformat.read(str(SOLUTION_NB), as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(f"import sys; sys.path.insert(0, {str(ROOT)!r})"))
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    for part, pts in (("part1", 2), ("part2", 3), ("part3", 2), ("part4", 3)):
        assert f"a0 {part}: {pts}/{pts} points on the public tests" in text
    shown = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "execute_result"]
    assert not [o for o in shown if "<check" in o["data"].get("text/plain", "")], "the report, not a second line"


# ---- the self-check sees what the grader sees ----------------------------------------------------------------
PASTED = "def square(x):\n    \"\"\"Elementwise x**2 of a numpy array.\"\"\"\n    return x * x\n"


def _saved(tmp_path, square_cell):
    """The student's notebook as saved: the handout's graded cell a0-square replaced (None: deleted)."""
    import nbformat
    from autograder.generate import graded_marker
    nb = nbformat.read(str(ROOT / "tests/autograder/fixtures/generated/a0_demo.ipynb"), as_version=4)
    cells = []
    for c in nb.cells:
        if c.metadata.get("grader", {}).get("id") == "a0-square":
            if square_cell is None:
                continue
            c.source = graded_marker("a0-square") + "\n" + square_cell
        cells.append(c)
    nb.cells = cells
    path = tmp_path / "a0_demo.ipynb"
    nbformat.write(nb, str(path))
    return path


@pytest.mark.parametrize("square_cell, says", [
    (None, "cell 'a0-square' is missing from a0_demo.ipynb: the grader finds graded cells by the id in their "
           "metadata, so it will score part1 0. To recover, copy the cell that starts with `# GRADED CELL "
           "'a0-square'` from the handout"),
    ("def square(x):\n    raise NotImplementedError('a0-square: replace this line with your code')\n",
     "the code this self-check ran for part1 is not what cell 'a0-square' of a0_demo.ipynb holds, and the grader "
     "runs only that cell: if you wrote it in another cell, move it into the cell that starts with "
     "`# GRADED CELL 'a0-square'`"),
])
def test_check_warns_when_the_graded_cell_is_not_what_it_ran(capsys, tmp_path, square_cell, says):
    """Code pasted into a new cell: the self-check would pass it, the grader scores the part 0."""
    path = _saved(tmp_path, square_cell)
    ns = {"In": ["", PASTED], "__session__": str(path)}
    exec(PASTED, ns)
    r = check("a0", "part1", namespace=ns)
    out = capsys.readouterr().out
    assert r.score == 2 and "[WARN] " + says in out, out
    r = check("a0", "part1", namespace={**ns, "__session__": str(_saved(tmp_path, PASTED))})
    assert "[WARN]" not in capsys.readouterr().out


def test_check_names_the_line_an_exception_came_from(capsys):
    src = "def square(x):\n    n = 0\n    return x * x / n\n"
    import linecache
    ns = {"In": ["", src]}
    linecache.cache["/tmp/ipykernel_1/123.py"] = (len(src), None, src.splitlines(True), "/tmp/ipykernel_1/123.py")
    exec(compile(src, "/tmp/ipykernel_1/123.py", "exec"), ns)      # as IPython runs a cell
    import numpy as np
    with np.errstate(divide="raise", invalid="raise"):
        check("a0", "part1", namespace=ns)
    out = capsys.readouterr().out
    assert "FloatingPointError" in out and "(cell 'a0-square' line 3: `return x * x / n`)" in out, out
