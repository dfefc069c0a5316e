"""Finding and validating specs; reading notebooks."""
import pytest

from autograder.notebook import NotebookError, infer_assignment, load_submission, python_source
from autograder.spec import find_spec_file, list_assignments, load_assignment
from ag_support import FIXTURES, SOLUTION_NB
from ag_nbtools import write_notebook


def test_spec_lookup_by_id_name_and_path():
    assert find_spec_file("a0") == find_spec_file("a0_demo") == (FIXTURES / "assignments" / "a0_demo.py")
    assert find_spec_file(str(FIXTURES / "assignments" / "a0_demo.py")).name == "a0_demo.py"
    assert "a0_demo" in list_assignments()
    with pytest.raises(LookupError, match="no assignment spec named 'a99'"):
        load_assignment("a99")


def test_spec_shape(a0):
    assert a0.max_score == 10 and [p.id for p in a0.parts] == ["part1", "part2", "part3", "part4"]
    assert a0.graded_cells() == ["a0-square", "a0-square-backward", "a0-sumsq", "a0-pack"]
    assert a0.solution_path() == FIXTURES / "solutions" / "a0_demo.ipynb"
    hidden = a0.hidden_cases()
    assert [c.label for c in hidden[("part1", "forward")]] == ["hidden case 1", "hidden case 2"]
    assert all(c.hidden for cs in hidden.values() for c in cs)
    assert [t.name for t in a0.hidden_tests()["part1"]] == ["large values"]


def test_observe_must_be_a_module_function(tmp_path):
    (tmp_path / "assignments").mkdir()
    (tmp_path / "assignments" / "a7_bad.py").write_text(
        "from autograder.spec import Assignment, Part, Test, Verdict\n"
        "ASSIGNMENT = Assignment('a7', 'a7_bad', 'bad', [Part('p', 'p', ['c'], [\n"
        "    Test('t', 1, lambda ns, c: {}, lambda c, o, x: Verdict.ok())])])\n")
    with pytest.raises(ValueError, match="must be a top-level function"):
        load_assignment("a7", extra=[tmp_path / "assignments"])


def test_magics_become_comments_keeping_line_numbers():
    src = "%matplotlib inline\nx = 1\nif x:\n    !ls\ny = '%d' % 3"
    out = python_source(src)
    assert out.splitlines()[1] == "x = 1" and out.splitlines()[4] == "y = '%d' % 3"
    assert len(out.splitlines()) == 5
    compile(out, "x", "exec")


def test_load_submission_and_infer(tmp_path):
    sub = load_submission(SOLUTION_NB)
    assert list(sub.cells) == ["a0-square", "a0-square-backward", "a0-sumsq", "a0-pack"]
    assert sub.assignment == "a0" and infer_assignment(SOLUTION_NB) == "a0"
    dup = write_notebook(tmp_path / "x.ipynb", [("code", "a", "first"), ("code", "a", "second")], None)
    s = load_submission(dup)
    assert s.cells == {"a": "first\n"} and s.duplicates == ["a"] and s.assignment is None
    assert infer_assignment(tmp_path / "a3_foo.ipynb") == "a3"
    bad = tmp_path / "bad.ipynb"
    bad.write_text("[]")
    with pytest.raises(NotebookError):
        load_submission(bad)
