"""Student notebooks from solution notebooks: ``python -m autograder generate [--check]``.

For every ``solutions/aN_*.ipynb`` this writes ``assignments/aN_*.ipynb`` where

* every region between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` in a code cell becomes
  ``raise NotImplementedError(...)`` at the indentation of the ``BEGIN`` line (in markdown cells,
  "YOUR ANSWER HERE");
* every graded cell starts with a ``# GRADED CELL '<id>'`` line, so students see which cells the grader runs;
* cells marked ``metadata["grader"]["solution_only"] = true`` are dropped;
* outputs and execution counts are cleared; metadata (the graded cells' ids) is kept;
* the bytes are deterministic: nbformat's sorted-key JSON, cell ids derived from content when missing;
* a last "Submitting" cell is added, the same for every assignment: which file to upload, ``make grade``,
  and the names the graded cells may not use (the spec's ``forbidden`` rules, so no student learns them
  from a 0).

Each handout records a digest of its cells (``metadata["grader"]["generated"]``). A handout whose cells
no longer match it was edited by hand, maybe by a student who worked in ``assignments/``: it is never
overwritten without ``--force`` (students work in ``work/``, see ``make start``).

``--check`` writes nothing and exits 1 if a committed assignment differs from what would be generated.
"""
from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

import nbformat

from .notebook import GRADER_KEY, cell_grader_id
from .spec import assignment_key_from_filename, find_spec_file, load_assignment

BEGIN = re.compile(r"^(?P<indent>[ \t]*)#+\s*BEGIN SOLUTION\b")
END = re.compile(r"^[ \t]*#+\s*END SOLUTION\b")
MD_BEGIN = re.compile(r"^\s*(<!--\s*)?#+\s*BEGIN SOLUTION\b")
MD_END = re.compile(r"^\s*(<!--\s*)?#+\s*END SOLUTION\b")


class GenerateError(ValueError):
    pass


def strip_solutions(source: str, label: str, *, markdown: bool = False) -> str:
    """Replace every solution region of one cell's source."""
    out: list[str] = []
    inside = False
    begin_at = 0
    lines = source.split("\n")
    for n, line in enumerate(lines, 1):
        if not inside:
            m = (MD_BEGIN if markdown else BEGIN).match(line)
            if m:
                inside, begin_at = True, n
                if markdown:
                    out.append("YOUR ANSWER HERE")
                else:
                    ind = m.group("indent")
                    out.append(f"{ind}# YOUR CODE HERE")
                    out.append(f'{ind}raise NotImplementedError("{label}: replace this line with your code")')
            elif (MD_END if markdown else END).match(line):
                raise GenerateError(f"{label}: line {n}: END SOLUTION without BEGIN SOLUTION")
            else:
                out.append(line)
        else:
            if (MD_BEGIN if markdown else BEGIN).match(line):
                raise GenerateError(f"{label}: line {n}: BEGIN SOLUTION inside the region begun on line {begin_at}")
            if (MD_END if markdown else END).match(line):
                inside = False
    if inside:
        raise GenerateError(f"{label}: BEGIN SOLUTION on line {begin_at} is never closed")
    return "\n".join(out)


def student_notebook(nb, name: str = ""):
    """The student version of a solution notebook (a new object; `nb` is left alone)."""
    nb = nbformat.from_dict(nb)
    cells = []
    for i, cell in enumerate(nb.cells):
        meta = cell.get("metadata", {}).get(GRADER_KEY, {})
        if isinstance(meta, dict) and meta.get("solution_only"):
            continue
        label = cell_grader_id(cell) or f"{name} cell {i}".strip()
        cell.source = strip_solutions(cell.source, label, markdown=cell.cell_type == "markdown")
        if cell.cell_type == "code" and cell_grader_id(cell):
            cell.source = graded_marker(cell_grader_id(cell)) + "\n" + cell.source
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
        cell.metadata.pop("execution", None)      # nbclient timing metadata
        cell.metadata.pop("collapsed", None)
        if not cell.get("id"):
            digest = hashlib.sha1(f"{i}\0{cell.source}".encode()).hexdigest()[:8]
            cell["id"] = cell_grader_id(cell) or f"cell-{digest}"
        cells.append(cell)
    key = assignment_key_from_filename(name)
    if key is not None:
        cells.append(submitting_cell(name, key))
    nb.cells = cells
    nb.metadata.setdefault(GRADER_KEY, {})["generated"] = cells_digest(cells)
    return nb


def graded_marker(cell_id: str) -> str:
    """The first line of every graded cell of a handout: which cell the grader runs, and how it finds it."""
    return (f"# GRADED CELL '{cell_id}': the grader runs this very cell, found by its id (in the cell's metadata): "
            f"keep your code here, not in a copy")


def submitting_cell(name: str, key: str):
    """The handout's last cell: how to submit, and what the graded cells may not use."""
    text = (f"## Submitting\n\nSubmit **`work/{name}.ipynb`**, the notebook you worked in (`make start A={key}` "
            f"made it), under that name, to the assignment on Gradescope: upload the file itself. Before you do, "
            f"run `make grade A={key}`: it grades that very file as the course's grader will, on the public tests "
            f"(the grader adds hidden cases). Only the graded cells are run (each starts with a `# GRADED CELL` line; "
            f"the grader finds it by an id in its metadata, so keep your code in that very cell, not in a copy), "
            f"so keep your experiments in other cells. On Gradescope each part runs after the reference solution "
            f"of the parts before it; `make grade` in your copy of the course has no reference solutions, so there "
            f"each part runs after your own earlier parts, and an early mistake can also fail later parts.")
    try:
        find_spec_file(key)
    except LookupError:
        forbidden = []
    else:
        forbidden = load_assignment(key).forbidden
    if forbidden:
        names = ", ".join(f"`{r[1:]}` itself" if r.startswith("=") else f"`{r}`" for r in dict.fromkeys(forbidden))
        text += (f"\n\n**Not allowed in graded cells:** {names} (a name covers everything under it, except one "
                 f"marked *itself*; `*.y` is `y` under any name). The grader reads each graded cell's code (imports and attribute "
                 f"uses, not comments or strings) and a part that uses one scores 0, with a message naming the "
                 f"line. This is the code you are asked to write yourself.")
    digest = hashlib.sha1(text.encode()).hexdigest()[:8]
    return nbformat.v4.new_markdown_cell(text, id=f"submitting-{digest}")


def cells_digest(cells) -> str:
    """What a student edits: every cell's type and source (outputs and metadata are Jupyter's)."""
    h = hashlib.sha256()
    for c in cells:
        h.update(json.dumps([c.get("cell_type"), c.get("source")]).encode())
    return "sha256:" + h.hexdigest()[:16]


def edited_by_hand(path: Path) -> bool:
    """True if the notebook at `path` is not what the generator last wrote there (cells changed since)."""
    try:
        nb = nbformat.read(str(path), as_version=4)
    except Exception:
        return True
    stamp = nb.metadata.get(GRADER_KEY, {}).get("generated")
    cells = [{"cell_type": c.cell_type, "source": c.source} for c in nb.cells]
    return stamp != cells_digest(cells)


def render(nb) -> bytes:
    text = nbformat.writes(nb, version=4)
    return (text if text.endswith("\n") else text + "\n").encode("utf-8")


def generate(src: Path, dst: Path) -> dict[Path, bytes]:
    """{assignment path: bytes} for every solution notebook in `src`."""
    out = {}
    sources = sorted(p for p in src.glob("a*.ipynb") if re.match(r"^a\d+", p.stem))
    for p in sources:
        with open(p, encoding="utf-8") as f:
            nb = nbformat.read(f, as_version=4)
        out[dst / p.name] = render(student_notebook(nb, p.stem))
    return out


TABLE_BEGIN = "<!-- assignment table: generated from the specs by `python -m autograder generate` -->"
TABLE_END = "<!-- end of the assignment table -->"


def assignment_table() -> str:
    """autograder/README.md's table of assignments, one row per spec (its ``summary`` says what it grades)."""
    from .spec import BUILTIN_SPEC_DIR, list_assignments
    rows = ["| id | notebook (source → student copy) | spec | graded on | points |",
            "| --- | --- | --- | --- | --- |"]
    for name in sorted(list_assignments(), key=lambda n: int(re.match(r"a(\d+)", n).group(1))):   # a2 before a11
        spec = find_spec_file(name)
        if spec.parent != BUILTIN_SPEC_DIR:
            continue                     # only the course's own specs (not --spec-dir ones)
        a = load_assignment(name)
        modules = ", ".join(f.stem for f in sorted(spec.glob("*.py")) if f.stem != "__init__")
        where = f"`assignments/{spec.name}/` ({modules})" if spec.is_dir() else f"`assignments/{spec.name}`"
        rows.append(f"| {a.id} | `{a.solution}` → `assignments/{a.notebook}` | {where} | {a.summary or a.title} | "
                    f"{a.max_score:g} ({len(a.parts)} parts) |")
    return "\n".join(rows)


def readme_with_table(text: str) -> str:
    """`text` (autograder/README.md) with the generated table between its markers."""
    head, sep, rest = text.partition(TABLE_BEGIN)
    if not sep or TABLE_END not in rest:
        raise GenerateError(f"autograder/README.md: no {TABLE_BEGIN!r} ... {TABLE_END!r} block for the table")
    return head + TABLE_BEGIN + "\n" + assignment_table() + "\n" + TABLE_END + rest.split(TABLE_END, 1)[1]


def main(src: Path = Path("solutions"), dst: Path = Path("assignments"), check: bool = False,
         force: bool = False) -> int:
    if not src.is_dir():
        print(f"generate: no folder {src}: nothing to generate (a student release has no solutions)",
              file=sys.stderr)
        return 0
    try:
        files = generate(src, dst)
    except GenerateError as e:
        print(f"generate: {e}", file=sys.stderr)
        return 1
    readme = Path(__file__).resolve().parent / "README.md"
    try:
        table = readme_with_table(readme.read_text())
    except GenerateError as e:
        print(f"generate: {e}", file=sys.stderr)
        return 1
    if table != readme.read_text():
        if check:
            print(f"generate --check: {readme} has an out-of-date assignment table", file=sys.stderr)
            print("run `make assignments` (python -m autograder generate) and commit the result", file=sys.stderr)
            return 1
        readme.write_text(table)
        print(f"wrote the assignment table of {readme}")
    stale = [p for p, data in files.items() if not p.exists() or p.read_bytes() != data]
    edited = [p for p in stale if p.exists() and edited_by_hand(p)]
    if check:
        orphans = sorted(set(dst.glob("a*.ipynb")) - set(files)) if dst.is_dir() else []
        for p in stale:
            why = "missing" if not p.exists() else "edited by hand" if p in edited else "out of date"
            print(f"generate --check: {p} is {why}", file=sys.stderr)
        for p in orphans:
            print(f"generate --check: {p} has no solution notebook in {src}", file=sys.stderr)
        if stale or orphans:
            print("run `make assignments` (python -m autograder generate) and commit the result", file=sys.stderr)
            if edited:
                print(_EDITED_HINT, file=sys.stderr)
            return 1
        print(f"generate --check: {len(files)} assignment notebook(s) up to date")
        return 0
    if edited and not force:
        for p in edited:
            print(f"generate: {p} was edited by hand since it was generated; not overwriting it", file=sys.stderr)
        print(_EDITED_HINT + "\nTo replace the edited handouts anyway: python -m autograder generate --force",
              file=sys.stderr)
        return 1
    dst.mkdir(parents=True, exist_ok=True)
    for p in stale:
        p.write_bytes(files[p])
        print(f"wrote {p}")
    return 0


_EDITED_HINT = ("If that is your work on an assignment, keep it: copy it to work/ (cp assignments/aN_x.ipynb "
                "work/) and go on there; `make grade A=aN` grades work/.")
