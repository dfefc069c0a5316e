"""`check("a1", "part1")` from a notebook cell: the public tests of a part, run in-process.

This is a convenience for students. It runs on the notebook's own definitions, in the notebook's
process, without a sandbox, hidden cases or reference substitution, so it never produces a grade.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .forbidden import forbidden_message
from .spec import ROOT, Namespace, Verdict, load_assignment

NOT_IMPLEMENTED = "not implemented yet"


@dataclass
class CheckResult:
    assignment: str
    part: str
    score: float
    max_score: float
    messages: list[str]

    def __bool__(self) -> bool:
        return self.score >= self.max_score

    def __repr__(self) -> str:
        return f"<check {self.assignment} {self.part}: {self.score:g}/{self.max_score:g} points>"

    def _ipython_display_(self):
        """`check(...)` as a cell's last line: the report is printed already, so Jupyter shows nothing more."""


class _Ctx:
    """What verdicts get during a self-check: no plots."""

    def __init__(self, a, part, test, case):
        self.assignment, self.part, self.test, self.case = a, part, test, case
        self.artifact_dir = None
        self.plot_timeline = None

    def artifact_path(self, *args, **kwargs):
        return None

    def timeline(self, *args, **kwargs):
        return None


def _where(exc, sources, spec_dir="") -> str:
    """Where in the student's code an exception was raised: "cell 'a3-accum' line 7: `total / count`" when
    the line is in one of the part's graded cells `sources` [(cell id, source)], else its line and code."""
    import traceback
    from pathlib import Path as _P
    skip = [str(_P(__file__).resolve().parent), str(_P(np.__file__).resolve().parent.parent), spec_dir or "\0"]
    try:
        import minigrad
        skip.append(str(_P(minigrad.__file__).resolve().parent))
    except Exception:
        pass
    for f in reversed(traceback.extract_tb(exc.__traceback__)):
        if any(str(f.filename).startswith(d) for d in skip) or not f.line:
            continue
        for cid, src in sources:
            lines = src.splitlines()
            if 0 < f.lineno <= len(lines) and lines[f.lineno - 1].strip() == f.line.strip():
                return f" (cell '{cid}' line {f.lineno}: `{f.line.strip()}`)"
        return f" (line {f.lineno}: `{f.line.strip()}`)"
    return ""


def _one(a, part, test, case, ns, sources=()) -> Verdict:
    try:
        case.inputs = dict(test.inputs(case.params)) if test.inputs else {}
    except Exception as e:
        return Verdict.fail(f"(self-check could not build its inputs: {e!r})")
    try:
        obs = test.observe(ns, case)
        obs = {k: np.asarray(v) for k, v in obs.items()}
    except KeyboardInterrupt:
        raise
    except NotImplementedError:
        return Verdict.fail(NOT_IMPLEMENTED)
    except BaseException as e:   # SystemExit from student code must not end the kernel's cell silently
        return Verdict.fail(f"{type(e).__name__}: {e}{_where(e, sources, str(Path(a.spec_file).resolve().parent))}")
    try:
        return test.verdict(case, obs, _Ctx(a, part, test, case))
    except Exception as e:
        return Verdict.fail(f"could not check the result ({type(e).__name__}: {e})")


def _top_level_names(source: str, imports: bool = True) -> set[str]:
    """The names a cell binds at its top level: defs, classes, assignments and (`imports`) imports."""
    import ast
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    out = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif imports and isinstance(node, (ast.Import, ast.ImportFrom)):
            out |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"}
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                out |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
    return out


def _cell_names(a) -> dict[str, set[str]]:
    """{graded cell id: the names its handout (or, for the course staff, its solution) cell defines}."""
    from .notebook import load_submission
    for path in (ROOT / "assignments" / a.notebook, a.solution_path()):
        if path is not None and path.is_file():
            try:
                cells = load_submission(path).cells
            except Exception:
                continue
            # not the names a cell imports (`mg`, `np`): every experiment cell may bind those too
            return {cid: _top_level_names(src, imports=False) for cid, src in cells.items()}
    return {}


def graded_sources(a, part, namespace: dict) -> list[tuple[str, str]]:
    """[(graded cell id, source as last run)] of `part`, from the kernel's own history.

    IPython keeps every executed cell's source in order (``In``, also ``_ih``, in the notebook's namespace).
    A graded cell is found there as the latest executed cell that binds a name its handout cell defines
    (``class BestFitAllocator``, ``def round_size``, ``from ... import X as round_size``): that is the code
    whose definitions the self-check is about to test, and the graded cell the grader will scan. The
    notebook file is not read: the kernel does not reliably know its path (JupyterLab, VS Code and nbclient
    say it differently, or not at all), and the file on disk may lag behind what ran until it is saved.
    Without IPython's history (``check`` called with a plain namespace) there is nothing to scan."""
    history = namespace.get("In") or namespace.get("_ih")
    if not isinstance(history, list) or not history:
        return []
    defines = _cell_names(a)
    bound = [(i, src, _top_level_names(src)) for i, src in enumerate(history) if isinstance(src, str)]
    out = []
    for cid in part.cells:
        names = defines.get(cid) or set(part.names)
        latest = {}
        for i, src, got in bound:
            for n in got & names:
                latest[n] = i
        for i in sorted(set(latest.values())):
            out.append((cid, history[i]))
    return out


def saved_notebook(a, namespace: dict):
    """The notebook file this kernel runs, when it can be told: JupyterLab's ``__session__``, VS Code's
    ``__vsc_ipynb_file__``, else the assignment's notebook in the working folder (Jupyter starts a kernel in
    its notebook's folder). None when there is none."""
    from pathlib import Path
    for key in ("__session__", "__vsc_ipynb_file__"):
        p = namespace.get(key)
        if isinstance(p, str) and p.endswith(".ipynb") and Path(p).is_file():
            return Path(p)
    p = Path.cwd() / a.notebook
    return p if p.is_file() else None


def _normal(src: str) -> list[str]:
    return [ln.strip() for ln in src.splitlines() if ln.strip() and not ln.strip().startswith("# GRADED CELL")]


def what_the_grader_sees(a, part, sources, path) -> list[str]:
    """Warnings when the saved notebook's graded cells are not the code this self-check ran: a graded cell
    missing (its id is how the grader finds it), or the code in another cell, or not saved yet."""
    from .notebook import NotebookError, load_submission
    try:
        cells = load_submission(path).cells
    except NotebookError:
        return []
    out = []
    for cid in part.cells:
        if cid not in cells:
            out.append(f"cell '{cid}' is missing from {path.name}: the grader finds graded cells by the id in their "
                       f"metadata, so it will score {part.id} 0. To recover, copy the cell that starts with "
                       f"`# GRADED CELL '{cid}'` from the handout (assignments/{a.notebook}) into your notebook, put "
                       f"your code in it, and delete your copy")
            continue
        ran = [src for c, src in sources if c == cid]
        if ran and all(_normal(src) != _normal(cells[cid]) for src in ran):
            out.append(f"the code this self-check ran for {part.id} is not what cell '{cid}' of {path.name} holds, "
                       f"and the grader runs only that cell: if you wrote it in another cell, move it into the cell "
                       f"that starts with `# GRADED CELL '{cid}'`; if you did, save the notebook")
    return out


def check(assignment: str, part: str | None, namespace: dict, *, quiet: bool = False) -> CheckResult:
    a = load_assignment(assignment)
    parts = [a.part(part)] if part else a.parts
    ns = Namespace(namespace, where="this notebook")
    score = maxs = 0.0
    lines = []
    path = saved_notebook(a, namespace)
    for p in parts:
        part_lines, started = [], False
        sources = graded_sources(a, p, namespace)
        forbidden = forbidden_message(a.forbidden, a.preamble, sources)
        warnings = what_the_grader_sees(a, p, sources, path) if path is not None else []
        if forbidden:                   # what the grader will say: the part scores 0, its tests do not run
            maxs += p.points
            lines += [f"  [FAIL] {p.id}: {forbidden} (0/{p.points:g})"]
            continue
        for t in p.tests:
            vs = [(c, _one(a, p, t, c, ns, sources)) for c in t.public_cases()]
            ok = [v.passed for _, v in vs]
            started |= any(v.message != NOT_IMPLEMENTED for _, v in vs)
            got = t.points if all(ok) else (t.points * sum(ok) / len(ok) if t.partial else 0.0)
            score, maxs = score + got, maxs + t.points
            mark = "ok  " if all(ok) else "FAIL"
            part_lines.append(f"  [{mark}] {p.id}: {t.name} ({got:g}/{t.points:g})")
            for c, v in vs:
                if not v.passed:
                    part_lines.append(f"         {c.describe()}: {v.message}")
                    break
        if not started:            # said once for the part, not under every test
            part_lines = [f"  [FAIL] {p.id}: not started, its cells still raise NotImplementedError "
                          f"(0/{p.points:g})"]
        lines += part_lines + [f"  [WARN] {w}" for w in warnings]
    label = part or "all parts"
    head = f"{a.id} {label}: {score:g}/{maxs:g} points on the public tests"
    tail = "  (a self-check: grades come from the autograder, with more cases)"
    if not quiet:
        print("\n".join([head, *lines, tail]))
    return CheckResult(a.id, label, score, maxs, lines)
