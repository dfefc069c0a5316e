"""Reading submissions: graded cells by their stable id, and which assignment a notebook belongs to.

A graded cell carries ``cell.metadata["grader"]["id"]`` (nbgrader style); the notebook may carry
``metadata["grader"]["assignment"]`` ("a1" or "a1_autograd"). Jupyter magics and shell escapes
(``%matplotlib inline``, ``!pip install``) are turned into comments so the cell runs as plain Python.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

GRADER_KEY = "grader"


class NotebookError(ValueError):
    """The file is not a notebook we can read (shown to the student as the reason for a 0)."""


@dataclass
class Submission:
    path: Path
    cells: dict[str, str]                       # graded cell id -> source (magics commented out)
    assignment: str | None = None               # from the notebook metadata
    duplicates: list[str] = field(default_factory=list)


_MAGIC = re.compile(r"^(\s*)([%!].*)$")


def python_source(source: str) -> str:
    """Comment out IPython magics and shell escapes, keeping line numbers unchanged."""
    out = []
    for line in source.splitlines():
        m = _MAGIC.match(line)
        if m:
            out.append(f"{m.group(1)}pass  # (notebook magic removed) {m.group(2)}")
        else:
            out.append(line)
    return "\n".join(out) + ("\n" if source.endswith("\n") or out else "")


def cell_grader_id(cell) -> str | None:
    meta = cell.get("metadata", {}).get(GRADER_KEY, {})
    gid = meta.get("id") if isinstance(meta, dict) else None
    return str(gid) if gid else None


def read_notebook(path: str | Path):
    import nbformat
    path = Path(path)
    try:
        with open(path, encoding="utf-8") as f:
            return nbformat.read(f, as_version=4)
    except FileNotFoundError:
        raise NotebookError(f"{path.name}: file not found") from None
    except Exception as e:   # nbformat raises many kinds; all mean "not a readable notebook"
        raise NotebookError(f"{path.name} is not a readable Jupyter notebook ({type(e).__name__}: "
                            f"{str(e)[:200]})") from None


def load_submission(path: str | Path) -> Submission:
    nb = read_notebook(path)
    cells: dict[str, str] = {}
    dups: list[str] = []
    for cell in nb.cells:
        if cell.get("cell_type") != "code":
            continue
        gid = cell_grader_id(cell)
        if gid is None:
            continue
        if gid in cells:
            dups.append(gid)     # keep the first: it is the one the assignment placed there
            continue
        cells[gid] = python_source(cell.get("source", ""))
    meta = nb.get("metadata", {}).get(GRADER_KEY, {})
    assignment = meta.get("assignment") if isinstance(meta, dict) else None
    return Submission(Path(path), cells, str(assignment) if assignment else None, dups)


def infer_assignment(path: str | Path) -> str | None:
    """The assignment key from the notebook metadata, else from the file name ("a1_..." -> "a1")."""
    from .spec import assignment_key_from_filename
    try:
        sub = load_submission(path)
        if sub.assignment:
            return sub.assignment
    except NotebookError:
        pass
    return assignment_key_from_filename(path)
