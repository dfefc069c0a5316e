"""`check("a1", "part1")` from a notebook cell: the public tests of a part, run in-process.

This is a convenience for students. It runs on the notebook's own definitions, in the notebook's
process, without a sandbox, hidden cases or reference substitution, so it never produces a grade.
"""
from __future__ import annotations

from dataclasses import dataclass

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


def _one(a, part, test, case, ns) -> Verdict:
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
        return Verdict.fail(f"{type(e).__name__}: {e}")
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


def check(assignment: str, part: str | None, namespace: dict, *, quiet: bool = False) -> CheckResult:
    a = load_assignment(assignment)
    parts = [a.part(part)] if part else a.parts
    ns = Namespace(namespace, where="this notebook")
    score = maxs = 0.0
    lines = []
    for p in parts:
        part_lines, started = [], False
        forbidden = forbidden_message(a.forbidden, a.preamble, graded_sources(a, p, namespace)) \
            if a.forbidden else ""
        if forbidden:                   # what the grader will say: the part scores 0, its tests do not run
            maxs += p.points
            lines += [f"  [FAIL] {p.id}: {forbidden} (0/{p.points:g})"]
            continue
        for t in p.tests:
            vs = [(c, _one(a, p, t, c, ns)) for c in t.public_cases()]
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
        lines += part_lines
    label = part or "all parts"
    head = f"{a.id} {label}: {score:g}/{maxs:g} points on the public tests"
    tail = "  (a self-check: grades come from the autograder, with more cases)"
    if not quiet:
        print("\n".join([head, *lines, tail]))
    return CheckResult(a.id, label, score, maxs, lines)
