"""The repository students clone: ``python -m autograder release --out DIR`` (``make release``).

It holds what the instructor repository tracks in git (``git ls-files``: never an untracked file, such as
a class's ``grades.csv`` or ``submissions/`` left in the checkout), less what stays private: the solution
notebooks (``solutions/``), the hidden cases (``autograder/hidden/``) and the developers' test suite
(``tests/``, which reads solutions and hidden cases; the release keeps ``tests/student/``, the quick check
its ``make test`` runs). minigrad itself is complete and ships whole: students read it, and the grader
refuses graded cells that use the parts they re-implement. The handouts ship as generated, and the README
loses its sections for instructors. Before anything is written the handouts must be up to date and no spec
may hold solution code (``answers.py``); the tree is written to a new folder next to `out`, checked once
more for a solution region or a private file, and only then put in place, so a release that stops leaves
nothing half-written behind (and a previous release, with its ``.git``, as it was).
"""
from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from .generate import BEGIN, generate
from .spec import ROOT

PRIVATE = ("solutions/", "autograder/hidden/", "tests/")
PUBLIC = ("tests/student/", "tests/conftest.py")     # under a private folder, yet shipped
MARKER = ".student-release"          # marks a folder this command wrote, so --force may replace it
INSTRUCTOR_HEADING = re.compile(r"^## Instructors\b")


class ReleaseError(RuntimeError):
    """The release cannot be written (or would leak); the message says why and what to do."""


def tracked_files(root: Path = ROOT, untracked: bool = False) -> list[str]:
    """The repository's files as git tracks them (so no virtual environments, results, work/ or a class's
    grades); `untracked`: also the files git does not ignore but does not track yet (the tests' copies of a
    working tree)."""
    extra = ["--others", "--exclude-standard"] if untracked else []
    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", *extra], capture_output=True,
                             check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        raise ReleaseError(f"cannot list the repository's files with git ({e}); run this in the instructor "
                           f"repository's checkout") from None
    return sorted(f for f in out.stdout.decode().split("\0") if f and (root / f).is_file())


def is_private(path: str) -> bool:
    return path.startswith(PRIVATE) and not path.startswith(PUBLIC)


def untracked_files(root: Path = ROOT) -> list[str]:
    """Files in the checkout that git does not ignore and does not track: left out of the release."""
    return sorted(set(tracked_files(root, untracked=True)) - set(tracked_files(root)))


def student_readme(text: str) -> str:
    """The README without its sections for instructors (``## Instructors ...`` up to the next ``## ``)."""
    out, skipping = [], False
    for line in text.splitlines(keepends=True):
        if line.startswith("## "):
            skipping = bool(INSTRUCTOR_HEADING.match(line))
        if not skipping:
            out.append(line)
    return "".join(out)


def _check_handouts(root: Path) -> None:
    stale = [p for p, data in generate(root / "solutions", root / "assignments").items()
             if not p.exists() or p.read_bytes() != data]
    if stale:
        raise ReleaseError(f"handouts out of date: {', '.join(str(p.relative_to(root)) for p in stale)}; run "
                           f"`make assignments` and commit them first")


def leaks(out: Path) -> list[str]:
    """Files of a release that must not be there: private paths, solution regions."""
    found = []
    for p in sorted(out.rglob("*")):
        rel = p.relative_to(out).as_posix()
        if p.is_dir() or rel.startswith(".git/"):
            continue
        if is_private(rel):
            found.append(f"{rel}: private")
            continue
        if p.suffix in (".ipynb", ".py", ".md", ".txt", ".toml", ".sh", ""):
            text = p.read_text(encoding="utf-8", errors="replace")
            lines = text.splitlines()
            if p.suffix == ".ipynb":
                import nbformat
                try:
                    lines = [ln for c in nbformat.reads(text, as_version=4).cells for ln in c.source.splitlines()]
                except Exception:        # not a notebook nbformat reads: its text, line by line
                    pass
            if any(BEGIN.match(ln) for ln in lines):
                found.append(f"{rel}: holds a solution region")
    return found


def build_release(out: Path, *, force: bool = False, root: Path = ROOT) -> Path:
    if not (root / "solutions").is_dir():
        raise ReleaseError(f"{root} has no solutions/: this is a student release already")
    out = out.resolve()
    if out.exists() and any(out.iterdir()):
        if not (out / MARKER).exists():
            raise ReleaseError(f"{out} exists and is not a student release; choose an empty or new folder")
        if not force:
            raise ReleaseError(f"{out} holds a previous release; pass --force (make release FORCE=1) to replace it")
    _check_handouts(root)
    from .answers import spec_answers
    answers = spec_answers(root)
    if answers:
        raise ReleaseError("a spec holds solution code, and specs ship to students (check() imports them):\n  "
                           + "\n  ".join(answers) + "\ncompute the expected values another way (NumPy, minigrad "
                           "in the parent, central differences)")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        for rel in tracked_files(root):
            if is_private(rel):
                continue
            dst = tmp / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / rel, dst)
        (tmp / "README.md").write_text(student_readme((root / "README.md").read_text()))
        (tmp / MARKER).write_text("Written by `python -m autograder release`; the instructor repository is the "
                                  "source.\n")
        found = leaks(tmp)
        if found:
            raise ReleaseError("the release would leak, so it is not written:\n  " + "\n  ".join(found))
        if out.exists():
            if (out / ".git").exists():          # keep the release's own git history, if the instructor made one
                (out / ".git").rename(tmp / ".git")
            shutil.rmtree(out)
        tmp.rename(out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return out
