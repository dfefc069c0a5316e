"""The student release: no solution region, no hidden case, no instructor test in it; the handouts equal the
instructor repository's; and inside it `make test` (a small subset), `make start`, `make grade` and the
self-check run."""
import ast
import subprocess
import sys

import nbformat
import pytest

from autograder.generate import BEGIN, END
from autograder.release import ReleaseError, build_release
from autograder.spec import ROOT
from workflow_support import VENV, make

pytestmark = pytest.mark.skipif(not (ROOT / ".git").exists(), reason="the release copies git's tracked files")


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    return build_release(tmp_path_factory.mktemp("rel") / "student")


def _texts(folder):
    for p in sorted(folder.rglob("*")):
        if p.is_file() and ".git" not in p.parts:
            try:
                yield p, p.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue


def _solution_lines():
    """Lines inside the solution regions that say something (not `return out`): a leak would carry them."""
    out = set()
    for path in (ROOT / "solutions").glob("*.ipynb"):
        for c in nbformat.read(str(path), as_version=4).cells:
            inside = False
            for line in c.source.splitlines():
                if BEGIN.match(line):
                    inside = True
                elif END.match(line):
                    inside = False
                elif inside and len(line.strip()) >= 30:
                    out.add(line.strip())
    # minigrad is complete and the specs compute expected values with NumPy: a line they hold anyway (the
    # stable softmax, say) is public, not a leak
    public = {ln.strip() for d in ("minigrad", "autograder/assignments") for f in (ROOT / d).rglob("*.py")
              for ln in f.read_text().splitlines()}
    return out - public


def _hidden_lines():
    """The hidden modules' case lines (not their imports and helpers, which are public code too)."""
    out = set()
    for path in (ROOT / "autograder" / "hidden").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") in ("CASES", "TESTS") for t in node.targets):
                seg = ast.get_source_segment(path.read_text(), node)
                out |= {ln.strip() for ln in seg.splitlines()[1:] if len(ln.strip()) >= 30}
    return out


def test_nothing_private_is_in_it(release):
    names = {p.relative_to(release).as_posix() for p in release.rglob("*")}
    for private in ("solutions", "autograder/hidden", "tests/course", "tests/autograder", "tests/lectures"):
        assert private not in names
    assert {"assignments/a1_autograd.ipynb", "minigrad/memory/allocator.py", "autograder/grader.py",
            "Makefile", "README.md", ".gitignore", "tests/student/test_setup.py", "tests/conftest.py"} <= names
    assert {n.split("/")[1] for n in names if n.startswith("tests/") and n.count("/") > 1} == {"student"}
    solution, hidden = _solution_lines(), _hidden_lines()
    assert len(solution) > 50 and len(hidden) > 10, "the grep needs something to look for"
    for p, text in _texts(release):
        sources = ([c.source for c in nbformat.reads(text, as_version=4).cells] if p.suffix == ".ipynb"
                   else [text])
        for src in sources:
            lines = {ln.strip() for ln in src.splitlines()}
            assert not any(BEGIN.match(ln) for ln in src.splitlines()), f"{p}: a solution region"
            assert not lines & solution, f"{p}: solution code {sorted(lines & solution)[:1]}"
            assert not lines & hidden, f"{p}: a hidden case {sorted(lines & hidden)[:1]}"


def test_handouts_and_readme(release):
    for p in (ROOT / "assignments").glob("*.ipynb"):
        assert (release / "assignments" / p.name).read_bytes() == p.read_bytes()
    readme = (release / "README.md").read_text()
    assert "## Students: start, self-check, grade, submit" in readme and "make start A=a1" in readme
    assert "Submit" in readme and "## Instructors" not in readme and "solutions/" not in readme
    assert "/work/" in (release / ".gitignore").read_text()


def test_make_test_start_grade_and_check_run_inside(release):
    r = make(release, "test")                                      # the release's whole `make test`
    assert r.returncode == 0 and "3 passed" in r.stdout, r.stdout + r.stderr
    assert "nothing to generate" in r.stderr                       # no solutions: no handout check
    assert make(release, "start", "A=a1").returncode == 0
    r = make(release, "grade", "A=a1")
    assert r.returncode == 0, r.stderr
    assert "0 / 100 points" in r.stdout and "this part is not started" in r.stdout
    # the grade output says how it differs from the course's grader (no reference for earlier parts)
    assert "no reference solutions" in r.stdout and "after your own earlier parts" in r.stdout
    code = ("import autograder, minigrad; from autograder import check\n"
            "print(autograder.__file__, minigrad.__file__)\n"
            "r = check('a1', 'part1', namespace={})\n")
    p = subprocess.run([sys.executable, "-c", code], cwd=release, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.count(str(release)) == 2                        # the release's own packages
    assert "a1 part1: 0/20 points on the public tests" in p.stdout and "does not define `Mul`" in p.stdout


def test_untracked_files_stay_out_and_a_refused_release_leaves_nothing(tmp_path):
    from workflow_support import copy_repo
    repo = copy_repo(tmp_path / "course", skip=("tests/", "benchmarks/", "docs/", "lectures/", "site/"))
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    (repo / "grades.csv").write_text("alice,100\n")                   # a class graded in the checkout
    (repo / "submissions").mkdir()
    (repo / "submissions" / "alice.ipynb").write_text("{}")
    out = build_release(tmp_path / "rel", root=repo)
    assert not (out / "grades.csv").exists() and not (out / "submissions").exists()
    assert (out / "assignments" / "a1_autograd.ipynb").exists()
    spec = repo / "autograder" / "assignments" / "a3_training_loop.py"      # an answer planted in a spec
    spec.write_text(spec.read_text() + "\n\ndef leaked(t, base_lr, warmup_steps, total_steps, min_lr):\n"
                    "    if t < warmup_steps:\n        return base_lr * (t + 1) / (warmup_steps + 1)\n"
                    "    if t >= total_steps:\n        return min_lr\n")
    with pytest.raises(ReleaseError, match="(?s)a spec holds solution code.*a3_training_loop.py line .*a3-schedule"):
        build_release(tmp_path / "rel2", root=repo)
    spec.write_text(spec.read_text().split("\n\ndef leaked")[0])
    (repo / "assignments" / "notes.md").write_text("### BEGIN SOLUTION\nx = 1\n")   # a leak: refused, nothing left
    subprocess.run(["git", "add", "assignments/notes.md"], cwd=repo, check=True)
    with pytest.raises(ReleaseError, match="would leak"):
        build_release(tmp_path / "rel3", root=repo)
    assert not (tmp_path / "rel3").exists() and not list(tmp_path.glob(".rel3-*"))


def test_a_release_refuses_to_leak_or_to_overwrite(release, tmp_path):
    with pytest.raises(ReleaseError, match="previous release"):
        build_release(release)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("not a release")
    with pytest.raises(ReleaseError, match="not a student release"):
        build_release(tmp_path / "mine")
    with pytest.raises(ReleaseError, match="student release already"):
        build_release(tmp_path / "again", root=release)
    assert VENV.exists()
