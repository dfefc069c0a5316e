"""The student's working copy: ``make start A=a1`` copies the handout to ``work/``, and ``make grade A=a1``
grades that copy. Nothing generated is ever written to ``work/`` (git ignores it), so regenerating the
handouts or pulling a new release never touches a student's answers.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from .spec import Assignment

WORK = Path("work")
HANDOUTS = Path("assignments")


class WorkCopyError(LookupError):
    """Which notebook to grade (or copy) cannot be decided; the message says what to do."""


def start(a: Assignment, handouts: Path = HANDOUTS, work: Path = WORK) -> Path:
    """Copy the handout to work/ and return its path; an existing copy is never replaced."""
    src, dst = handouts / a.notebook, work / a.notebook
    if dst.exists():
        raise WorkCopyError(f"{dst} exists already: it is your work, so it is left alone. Open it with "
                            f"`make lab`; to start over, move it away first (mv {dst} {dst}.old).")
    if not src.exists():
        raise WorkCopyError(f"{src}: no handout to start from (is this the course repository?)")
    work.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    return dst


def find_work(a: Assignment, work: Path = WORK) -> tuple[Path, list[Path]]:
    """(the notebook to grade, the other copies of it that were left alone).

    ``work/a1_autograd.ipynb`` is the student's copy; Jupyter's "Duplicate" makes
    ``a1_autograd-Copy1.ipynb`` beside it, which is never picked in its place."""
    own = work / a.notebook
    stem = Path(a.notebook).stem
    others = sorted(p for p in work.glob(f"{stem}*.ipynb") if p != own) if work.is_dir() else []
    if own.exists():
        return own, others
    if not others:
        raise WorkCopyError(f"no {own} yet: run `make start A={a.id}` to copy the handout there, then work "
                            f"in that copy")
    listed = "\n  ".join(str(p) for p in others)
    raise WorkCopyError(f"no {own}, but other copies of {stem}:\n  {listed}\nsay which one to grade: "
                        f"make grade A={a.id} NB={others[0]}")
