"""A student's work is never lost: start, edit, grade, regenerate the handouts, check, grade again, with the
real make targets in a copy of the repository; the edit survives every step."""
import nbformat
import pytest

from autograder.spec import ROOT
from course_support import solution_cells
from workflow_support import copy_repo, make

pytestmark = pytest.mark.skipif(not (ROOT / ".git").exists(), reason="copies the repository's tracked files")
SKIP = ("tests/", "benchmarks/", "docs/", "lectures/", "site/")     # what make start/grade/assignments never read


def set_cell(path, cell_id, source):
    nb = nbformat.read(str(path), as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("grader", {}).get("id") == cell_id)
    cell.source = source
    nbformat.write(nb, str(path))


def cell(path, cell_id):
    nb = nbformat.read(str(path), as_version=4)
    return next(c.source for c in nb.cells if c.metadata.get("grader", {}).get("id") == cell_id)


def test_the_students_edit_survives_every_step(tmp_path):
    repo = copy_repo(tmp_path / "course", skip=SKIP)
    handout, mine = repo / "assignments" / "a1_autograd.ipynb", repo / "work" / "a1_autograd.ipynb"
    mul = solution_cells(repo / "solutions" / "a1_autograd.ipynb")["a1-mul"]

    r = make(repo, "start", "A=a1")
    assert r.returncode == 0, r.stderr
    assert mine.read_bytes() == handout.read_bytes()
    set_cell(mine, "a1-mul", mul)                                   # the student's work
    (repo / "work" / "a1_autograd-Copy1.ipynb").write_bytes(handout.read_bytes())   # Jupyter's "Duplicate"
    edited = mine.read_bytes()

    r = make(repo, "grade", "A=a1")
    assert r.returncode == 0, r.stderr
    assert "a1_autograd - a1_autograd:" in r.stdout and "part1: Mul" in r.stdout
    assert "4 / 4" in next(ln for ln in r.stdout.splitlines() if "part1: Mul" in ln), r.stdout
    assert "a1_autograd-Copy1.ipynb" in r.stderr and "left alone" in r.stderr     # graded mine, not the copy

    # the instructor changes the solution and regenerates the handouts; the check make test runs passes
    sol = repo / "solutions" / "a1_autograd.ipynb"
    nb = nbformat.read(str(sol), as_version=4)
    nb.cells[0].source += "\n\n(Updated.)"
    nbformat.write(nb, str(sol))
    r = make(repo, "assignments")
    assert r.returncode == 0 and "wrote assignments/a1_autograd.ipynb" in r.stdout, r.stderr
    assert "(Updated.)" in handout.read_text()
    r = make(repo, "check-handouts")
    assert r.returncode == 0, r.stderr
    assert mine.read_bytes() == edited

    r = make(repo, "start", "A=a1")                                 # never replaces a copy
    assert r.returncode != 0 and "exists already" in r.stderr and mine.read_bytes() == edited

    r = make(repo, "grade", "A=a1")
    assert r.returncode == 0 and "4 / 4" in next(ln for ln in r.stdout.splitlines() if "part1: Mul" in ln)
    assert cell(mine, "a1-mul") == mul


def test_a_handout_edited_by_hand_is_never_overwritten(tmp_path):
    repo = copy_repo(tmp_path / "course", skip=SKIP)
    handout = repo / "assignments" / "a1_autograd.ipynb"
    set_cell(handout, "a1-mul", "class Mul(Function):\n    pass  # a student's work, in the old place\n")
    edited = handout.read_bytes()
    nb = nbformat.read(str(repo / "solutions" / "a1_autograd.ipynb"), as_version=4)
    nb.cells[0].source += "\n\n(Updated.)"
    nbformat.write(nb, str(repo / "solutions" / "a1_autograd.ipynb"))

    r = make(repo, "check-handouts")                                # what make test runs: compares, writes nothing
    assert r.returncode != 0 and "assignments/a1_autograd.ipynb is edited by hand" in r.stderr
    assert handout.read_bytes() == edited
    r = make(repo, "assignments")
    assert r.returncode != 0 and handout.read_bytes() == edited
    assert "assignments/a1_autograd.ipynb was edited by hand" in r.stderr and "--force" in r.stderr
    assert "work/" in r.stderr                                      # where the work belongs
    r = make(repo, "assignments", "FORCE=1")
    assert r.returncode == 0 and "(Updated.)" in handout.read_text()


def test_grade_asks_which_copy_when_the_students_own_is_missing(tmp_path):
    repo = copy_repo(tmp_path / "course", skip=SKIP)
    r = make(repo, "grade", "A=a1")
    assert r.returncode != 0 and "make start A=a1" in r.stderr
    (repo / "work").mkdir()
    for name in ("a1_autograd-Copy1.ipynb", "a1_autograd-Copy2.ipynb"):
        (repo / "work" / name).write_bytes((repo / "assignments" / "a1_autograd.ipynb").read_bytes())
    r = make(repo, "grade", "A=a1")
    assert r.returncode != 0 and "a1_autograd-Copy1.ipynb" in r.stderr and "a1_autograd-Copy2.ipynb" in r.stderr
    assert "NB=" in r.stderr
    r = make(repo, "grade", "A=a1", "NB=work/a1_autograd-Copy2.ipynb")
    assert r.returncode == 0 and "a1_autograd-Copy2" in r.stdout and "not started" in r.stdout


def test_make_lab_starts_as_root_too():
    """Jupyter refuses root without --allow-root: containers and CI images run as root."""
    import os
    r = make(ROOT, "-n", "lab")
    assert r.returncode == 0, r.stderr
    line = r.stdout.strip().splitlines()[-1]
    assert line.endswith("jupyter lab --allow-root") if os.geteuid() == 0 else line.endswith("jupyter lab")
