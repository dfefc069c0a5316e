"""Shared by the assignment tests: planted-bug variants as patches of the solution's graded cells.

A variant file holds ``# %% [cell-id]`` cells. A plain cell replaces the solution's cell of that id
(a hostile or from-scratch submission). A ``# %% [cell-id] patch`` cell changes the solution's cell in
place with blocks of::

    # <<<
    lines of the solution cell (must occur exactly once)
    # ===
    what the student wrote instead
    # >>>

so a planted bug reads as the few lines it changes, and the rest of the cell stays the solution's.
"""
import re

import nbformat

_MARK = re.compile(r"^# %% \[(?P<id>[^\]]+)\](?P<patch> patch)?\s*$")


_MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION")


def solution_cells(solution):
    """{grader cell id: source} of a solution notebook, as a student who got it right would write it: the
    ``### BEGIN/END SOLUTION`` marker lines left out."""
    nb = nbformat.read(solution, as_version=4)
    out = {}
    for c in nb.cells:
        cid = c.metadata.get("grader", {}).get("id")
        if cid:
            lines = [line for line in c.source.splitlines() if line.strip() not in _MARKERS]
            out[cid] = "\n".join(lines).strip("\n") + "\n"
    return out


def _apply_patch(source, body, cell_id):
    out = source
    for block in re.findall(r"^# <<<\n(.*?)^# ===\n(.*?)^# >>>$", body, flags=re.S | re.M):
        old, new = block
        assert out.count(old) == 1, f"patch for cell {cell_id!r}: the old lines must occur exactly once"
        out = out.replace(old, new)
    return out


def cell_overrides(text, solution):
    """{cell id: source} for the cells a variant file replaces or patches."""
    cells, cur = {}, None
    for line in text.splitlines():
        m = _MARK.match(line)
        if m:
            cur = m.group("id")
            cells[cur] = (bool(m.group("patch")), [])
        elif cur is not None:
            cells[cur][1].append(line)
    base = solution_cells(solution)
    out = {}
    for cid, (is_patch, lines) in cells.items():
        body = "\n".join(lines).strip("\n") + "\n"
        out[cid] = _apply_patch(base[cid], body, cid) if is_patch else body
    return out


def solution_with(solution, path, overrides):
    """Write the solution notebook with some graded cells replaced to ``path``."""
    nb = nbformat.read(solution, as_version=4)
    left = dict(overrides)
    for cell in nb.cells:
        gid = cell.metadata.get("grader", {}).get("id")
        if gid in left:
            cell.source = left.pop(gid)
    assert not left, f"no graded cells {sorted(left)} in the solution"
    nbformat.write(nb, str(path))
    return path


def scores(result):
    return {t.key: t.score for t in result.tests}


def result_of(result, key):
    return next(t for t in result.tests if t.key == key)


def forbidden_hits(assignment, src):
    """The assignment's forbidden uses in ``src``, found as the grader finds them (the cell's syntax tree,
    after the spec's preamble: autograder/forbidden.py)."""
    from autograder.forbidden import forbidden_uses
    return forbidden_uses(src, assignment.forbidden, assignment.preamble)


def solution_cells_allowed(assignment, solution):
    """The graded cells of the solution notebook that a forbidden-use pattern would reject (none, for a
    sound spec)."""
    from autograder.notebook import load_submission
    sub = load_submission(solution)
    return [gid for gid in assignment.graded_cells() if forbidden_hits(assignment, sub.cells[gid])]


def execute_notebook(path, timeout=180):
    """Run a notebook top to bottom in its folder; returns (its code cells' outputs, their stream text)."""
    from nbclient import NotebookClient
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=timeout, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    outs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    return outs, "".join(o.get("text", "") for o in outs if o.output_type == "stream")


def grade_planted(a, solution, variants_dir, names, folder, grade):
    """Grade planted-bug variants packed into as few submissions as possible: variants that change cells of
    different parts share one (a part's failure never cascades into another, so each keeps to its own part,
    and the packing checks that too). Returns {variant: (result, the parts it changes)}."""
    part_of = {c: p.id for p in a.parts for c in p.cells}
    groups = []                                   # [(parts taken, {variant: overrides})]
    for name in names:
        cells = cell_overrides((variants_dir / f"{name}.py").read_text(), solution)
        parts = {part_of[c] for c in cells}
        for taken, members in groups:
            if not taken & parts:
                taken.update(parts)
                members[name] = cells
                break
        else:
            groups.append((set(parts), {name: cells}))
    out = {}
    for i, (_, members) in enumerate(groups):
        overrides = {c: src for cells in members.values() for c, src in cells.items()}
        result = grade(solution_with(solution, folder / f"planted{i}.ipynb", overrides))
        for name, cells in members.items():
            out[name] = (result, {part_of[c] for c in cells})
    return out


def check_planted(name, result, parts, full, changed, feedback):
    """The variant's parts score `full` except for `changed`, and each of `feedback`'s messages holds its
    substrings (or matches its pattern, when given as a compiled regex)."""
    import pytest
    assert result.status in ("ok", "crashed", "timeout"), (name, result.message)
    got = {k: v for k, v in scores(result).items() if k.split("/")[0] in parts}
    want = {k: changed.get(k, v) for k, v in full.items() if k.split("/")[0] in parts}
    assert got == pytest.approx(want, abs=1e-3), (name, {k: v for k, v in got.items() if v != full[k]})
    for key, needles in feedback.items():
        msg = result_of(result, key).message
        for needle in ([needles] if isinstance(needles, (str, re.Pattern)) else needles):
            assert (needle.search(msg) if isinstance(needle, re.Pattern) else needle in msg), (name, key, needle, msg)
