"""Building test notebooks from readable scripts.

A script is split into cells at lines ``# %% [cell-id]`` (a graded cell), ``# %%`` (an ordinary code
cell) and ``# %% md`` (markdown; the following comment lines without their ``# ``).
"""
from __future__ import annotations

import re
from pathlib import Path

import nbformat

_MARK = re.compile(r"^# %%(?:\s+\[(?P<id>[^\]]+)\]|\s+(?P<md>md))?\s*$")


def cells_from_script(text: str) -> list[tuple[str, str | None, str]]:
    """[(cell_type, grader id or None, source)]"""
    cells, cur = [], None
    for line in text.splitlines():
        m = _MARK.match(line)
        if m:
            if cur:
                cells.append(cur)
            cur = ("markdown" if m.group("md") else "code", m.group("id"), [])
            continue
        if cur is None:
            continue            # text before the first marker: the file's own docstring / notes
        cur[2].append(line[2:] if cur[0] == "markdown" and line.startswith("# ") else line)
    if cur:
        cells.append(cur)
    return [(t, i, "\n".join(src).strip("\n")) for t, i, src in cells]


def make_notebook(cells, assignment: str | None = "a0"):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    if assignment:
        nb.metadata["grader"] = {"assignment": assignment}
    used = set()
    for n, (ctype, gid, src) in enumerate(cells):
        if ctype == "markdown":
            c = nbformat.v4.new_markdown_cell(src)
        else:
            c = nbformat.v4.new_code_cell(src)
            if gid:
                c.metadata["grader"] = {"id": gid}
        c.id = gid if gid and gid not in used else f"cell-{n}"
        used.add(c.id)
        nb.cells.append(c)
    return nb


def write_notebook(path: str | Path, cells, assignment: str | None = "a0") -> Path:
    path = Path(path)
    nbformat.write(make_notebook(cells, assignment), str(path))
    return path


def notebook_from_script(script: str | Path, path: str | Path, assignment: str | None = "a0") -> Path:
    text = Path(script).read_text() if isinstance(script, Path) else script
    return write_notebook(path, cells_from_script(text), assignment)


if __name__ == "__main__":   # python tests/autograder/ag_nbtools.py SCRIPT.py NOTEBOOK.ipynb [ASSIGNMENT]
    import sys
    notebook_from_script(Path(sys.argv[1]), sys.argv[2], *(sys.argv[3:4] or ["a0"]))
