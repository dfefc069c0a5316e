"""The repository students clone: ``python -m autograder release --out DIR`` (``make release``).

It holds what the instructor repository tracks in git, less what stays private: the solution notebooks
(``solutions/``), the hidden cases (``autograder/hidden/``) and the instructor-only tests (the planted-bug
variants in ``tests/course/`` are patches of the solutions; ``tests/autograder/`` grades fixtures with
hidden cases). minigrad itself is complete and ships whole: students read it, and the grader refuses
graded cells that import the parts they re-implement. The handouts ship as generated, and the README loses
its sections for instructors. Before writing anything the handouts must be up to date; afterwards the tree
is checked once more for a solution region or a hidden file, so a leak stops the release instead of
shipping.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from .generate import BEGIN, generate
from .spec import ROOT

PRIVATE = ("solutions/", "autograder/hidden/", "tests/course/", "tests/autograder/")
MARKER = ".student-release"          # marks a folder this command wrote, so --force may replace it
INSTRUCTOR_HEADING = re.compile(r"^## Instructors\b")


class ReleaseError(RuntimeError):
    """The release cannot be written (or would leak); the message says why and what to do."""


def tracked_files(root: Path = ROOT) -> list[str]:
    """The repository's files as git tracks them (so no virtual environments, results or work/)."""
    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"], capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        raise ReleaseError(f"cannot list the repository's files with git ({e}); run this in the instructor "
                           f"repository's checkout") from None
    return sorted(f for f in out.stdout.decode().split("\0") if f and (root / f).is_file())


def is_private(path: str) -> bool:
    return path.startswith(PRIVATE)


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
                lines = [ln for c in nbformat.reads(text, as_version=4).cells for ln in c.source.splitlines()]
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
        for p in out.iterdir():          # keep the release's own git history, if the instructor made one
            if p.name != ".git":
                shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
    _check_handouts(root)
    out.mkdir(parents=True, exist_ok=True)
    for rel in tracked_files(root):
        if is_private(rel):
            continue
        dst = out / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, dst)
    (out / "README.md").write_text(student_readme((root / "README.md").read_text()))
    (out / MARKER).write_text("Written by `python -m autograder release`; the instructor repository is the source.\n")
    found = leaks(out)
    if found:
        raise ReleaseError("the release would leak, so it is not finished:\n  " + "\n  ".join(found))
    return out
