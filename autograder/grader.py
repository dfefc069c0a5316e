"""Grading one notebook: one sandboxed child per part, every verdict computed here in the parent.

For part *k* the child runs, in order: the spec's preamble; the student's cells of the earlier parts
(guarded: their errors are ignored); the *reference* cells of the earlier parts (from the solution
notebook), which override whatever the student's earlier cells defined; and the student's cells of part
*k*. So a broken early part never cascades, and a child only ever receives reference code for parts
that were graded before it. The child returns arrays; the parent judges them.

If the child dies in the middle of a part (``os._exit``, a segfault), the cases that had not started are
run again in a fresh child (at most `max_restarts` times), so one crash costs only the case that caused
it. A dependency cell that crashes or hangs is left out of the later children.
"""
from __future__ import annotations

import importlib.util
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from . import sandbox
from .forbidden import forbidden_message
from .messages import (NO_REFERENCE, NOT_IMPLEMENTED, REJECTED, _one_error_said_once, _rejection,  # noqa: F401
                       _relevant_cell_error, _student_error_message, own_helper_hint)
from .notebook import NotebookError, load_submission
from .results import SubmissionResult, TestResult, worst
from .spec import Assignment, Case, Part, Test, Verdict


@dataclass
class GradeOptions:
    hidden: bool = False                    # add the hidden cases/tests (instructors, Gradescope)
    timeout: float | None = None            # seconds per part; overrides the spec
    memory_mb: int | None = None
    artifacts_dir: str | Path | None = None  # where plots go (None: no plots)
    plot_timeline: Callable | None = None   # plot_timeline(path, series, budget=..., title=...) -> path
    max_restarts: int = 2
    keep_sandbox: str | Path | None = None  # debugging: copy each sandbox folder here


@dataclass
class VerdictContext:
    """Handed to verdict functions: where to put plots, and how to draw a memory timeline."""
    assignment: Assignment
    part: Part
    test: Test
    case: Case
    artifact_dir: Path | None
    plot_timeline: Callable | None = None
    artifacts: list[str] = field(default_factory=list)

    def artifact_path(self, stem: str, suffix: str = ".png") -> Path | None:
        if self.artifact_dir is None:
            return None
        self.artifact_dir.mkdir(parents=True, exist_ok=True)
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in stem)
        return self.artifact_dir / f"{self.part.id}_{self.test.name}_{safe}{suffix}".replace(" ", "_")

    def timeline(self, stem: str, series: dict, *, budget: float | None = None, title: str = "") -> str | None:
        """Save a memory timeline plot next to the report; returns its path (None if plots are off)."""
        fn = self.plot_timeline
        if fn is None and importlib.util.find_spec("matplotlib") is None:
            return None            # e.g. on Gradescope, whose bundle installs only what grading needs
        path = self.artifact_path(stem)
        if path is None:
            return None
        if fn is None:
            try:
                from minigrad.memory import plot_timeline as fn   # the memory helper's plot, when present
            except Exception:
                from .verdicts import plot_timeline as fn
        try:
            out = fn(path, series, budget=budget, title=title)
        except TypeError:
            from .verdicts import plot_timeline
            out = plot_timeline(path, series, budget=budget, title=title)
        return str(out or path)




# ---- reference cells ----------------------------------------------------------------------------------
_reference_cache: dict[str, dict[str, list[tuple[str, str]]] | None] = {}


def reference_cells(a: Assignment) -> dict[str, list[tuple[str, str]]] | None:
    """{part id: [(cell id, source)]} from the solution notebook; None when there is none."""
    if a.spec_file in _reference_cache:
        return _reference_cache[a.spec_file]
    path = a.solution_path()
    ref = None
    if path is not None:
        sol = load_submission(path)
        ref = {p.id: [(c, sol.cells[c]) for c in p.cells if c in sol.cells] for p in a.parts}
        missing = [c for p in a.parts for c in p.cells if c not in sol.cells]
        if missing:
            raise ValueError(f"{a.name}: the solution notebook {path} lacks graded cells {missing}")
    _reference_cache[a.spec_file] = ref
    return ref


_handout_cache: dict[str, dict[str, str] | None] = {}


def handout_cells(a: Assignment) -> dict[str, str] | None:
    """{graded cell id: source} of the assignment's handout as generated (from the solution notebook, or the
    handout itself where there is no solution); None when neither is here."""
    if a.spec_file not in _handout_cache:
        cells = None
        try:
            sol = a.solution_path()
            if sol is not None:
                import nbformat
                from .generate import student_notebook
                from .notebook import cell_grader_id, python_source
                nb = student_notebook(nbformat.read(str(sol), as_version=4), Path(a.notebook).stem)
                cells = {cell_grader_id(c): python_source(c.source) for c in nb.cells
                         if c.cell_type == "code" and cell_grader_id(c)}
            else:
                handout = Path(a.spec_root()).parent / "assignments" / a.notebook
                if handout.is_file():
                    cells = load_submission(handout).cells
        except Exception:
            cells = None
        _handout_cache[a.spec_file] = cells
    return _handout_cache[a.spec_file]


def not_started(a: Assignment, part: Part, sub_cells: dict[str, str]) -> bool:
    """Are the part's graded cells exactly the handout's, which raise NotImplementedError? Then there is
    nothing of the student's to run: the part is not started, and no child is needed to say so."""
    handout = handout_cells(a)
    if not handout or not any("NotImplementedError" in handout.get(c, "") for c in part.cells):
        return False
    return all(c in sub_cells and c in handout and sub_cells[c].strip() == handout[c].strip() for c in part.cells)


def _forbidden_message(a: Assignment, part: Part, sub_cells: dict[str, str]) -> str:
    """Why the part scores 0 when a graded cell uses what the assignment asks students to write; "" if none."""
    return forbidden_message(a.forbidden, a.preamble, [(cid, sub_cells.get(cid, "")) for cid in part.cells])


# ---- one part -------------------------------------------------------------------------------------------
@dataclass
class _Job:
    k: int
    test: Test
    case: Case
    outcome: str = "pending"      # ok | error | timeout | crash | notrun | internal
    obs: dict | None = None
    message: str = ""


def _cells_for(a: Assignment, part: Part, sub_cells: dict[str, str], ref, bad_cells: set[str]) -> list[dict]:
    cells = [{"id": "preamble", "role": "preamble", "source": a.preamble}]
    earlier = a.parts[:a.parts.index(part)]
    if ref is None or a.run_student_dependencies:
        for q in earlier:
            for cid in q.cells:
                if cid in sub_cells and cid not in bad_cells:
                    cells.append({"id": cid, "role": "dependency", "source": sub_cells[cid]})
    if ref is not None:
        for q in earlier:
            for cid, src in ref[q.id]:
                cells.append({"id": cid, "role": "reference", "source": src})
    for cid in part.cells:
        if cid in sub_cells:
            cells.append({"id": cid, "role": "graded", "source": sub_cells[cid]})
    return cells


def _run_group(a, part, sub_cells, ref, bad_cells, jobs, inputs, stubs, preload, limits, opts, notes,
               cell_errors, rejected) -> str:
    """Run `jobs` (pending ones) in children whose minigrad leaves out `stubs`; fills in their outcomes."""
    status = "ok"
    remaining = [j for j in jobs if j.outcome == "pending"]
    restarts = 0
    while remaining:
        cells = _cells_for(a, part, sub_cells, ref, bad_cells)
        run = sandbox.run_child(
            spec_file=a.spec_file, spec_module=a.module_name, cells=cells,
            jobs=[{"k": j.k, "observe": j.test.observe.__name__, "params": j.case.params,
                   "label": j.case.label} for j in remaining],
            inputs={k: v for k, v in inputs.items() if int(k.split("/")[0]) in {j.k for j in remaining}},
            limits=limits, keep=opts.keep_sandbox, spec_extra=[str(p) for p in a.spec_paths()[1:]],
            stubs=stubs, preload=preload)
        if not run.sandbox or not run.sandbox.get("ok"):
            why = (run.sandbox or {}).get("error") or f"the child did not start ({run.describe_exit()}): " \
                                                      f"{run.stderr_tail[-500:]}"
            for j in remaining:
                j.outcome, j.message = "internal", f"grader error: the sandbox could not be set up ({why})"
            return "error"
        # the per-cell report: errors in this part's own cells explain failures below
        if run.cells:
            for c in run.cells:
                err = c.get("error", {})
                if c.get("role") in ("graded", "integrity") and not c.get("ok") and err.get("type") in REJECTED:
                    msg = _rejection(err, c["id"] if c.get("role") == "graded" else "")
                    if msg not in rejected:
                        rejected.append(msg)
                elif c.get("role") == "graded" and not c.get("ok"):
                    msg = _student_error_message(err, f" in cell '{c['id']}'")
                    if all(m != msg for _, m in cell_errors):
                        cell_errors.append((c["id"], msg))
                if c.get("role") in ("preamble", "reference") and not c.get("ok"):
                    notes.append(f"grader error: {c['role']} cell {c['id']} failed: {err.get('message', '')}")
                    status = worst(status, "error")
        unfinished = [i for i in run.cell_started if i not in run.cell_done]
        if unfinished:
            cell = cells[unfinished[0]]
            what = run.describe_exit()
            if cell["role"] == "dependency" and restarts < opts.max_restarts:
                bad_cells.add(cell["id"])
                notes.append(f"cell '{cell['id']}' stopped the grader ({what}); later parts run without it")
                restarts += 1
                continue
            kind = "timeout" if run.timed_out else "crash"
            msg = f"while running cell '{cell['id']}', {what}."
            for j in remaining:
                j.outcome, j.message = kind, msg
            return worst(status, "timeout" if run.timed_out else "crashed")
        for j in remaining:
            st = run.status.get(j.k)
            if st is not None:
                if st.get("ok") and j.k in run.observations:
                    j.outcome, j.obs = "ok", run.observations[j.k]
                elif st.get("ok"):
                    j.outcome = "error"
                    j.message = ("the results of this case could not be read: "
                                 + run.observation_errors.get(j.k, "no observations were written"))
                else:
                    j.outcome = "error"
                    err = st.get("error") or {}
                    if err.get("type") in REJECTED:
                        msg = _rejection(err)
                        if msg not in rejected:
                            rejected.append(msg)
                    j.message = _student_error_message(err)
            elif j.k in run.started:
                j.outcome = "timeout" if run.timed_out else "crash"
                j.message = f"while running this case, {run.describe_exit()}."
                status = worst(status, "timeout" if run.timed_out else "crashed")
        remaining = [j for j in remaining if j.outcome == "pending"]
        if not remaining or run.done:
            for j in remaining:
                j.outcome, j.message = "error", "no result was reported for this case"
            break
        if run.timed_out:
            for j in remaining:
                j.outcome, j.message = "notrun", "not run: the part used up its time limit on an earlier case"
            break
        restarts += 1
        if restarts > opts.max_restarts:
            for j in remaining:
                j.outcome, j.message = "notrun", "not run: the process kept dying on earlier cases"
            break
    return status


def grade_part(a: Assignment, part: Part, sub_cells: dict[str, str], opts: GradeOptions,
               bad_cells: set[str], ref) -> tuple[list[TestResult], str, list[str]]:
    """Returns (test results, status, notes)."""
    tests = list(part.tests)
    hidden_cases = a.hidden_cases() if opts.hidden else {}
    if opts.hidden:
        tests += a.hidden_tests().get(part.id, [])
    jobs: list[_Job] = []
    per_test: dict[str, list[_Job]] = {}
    inputs: dict[str, np.ndarray] = {}
    for t in tests:
        cases = t.public_cases() + hidden_cases.get((part.id, t.name), [])
        for c in cases:
            job = _Job(len(jobs), t, c)
            try:
                c.inputs = dict(t.inputs(c.params)) if t.inputs else {}
            except Exception as e:
                job.outcome, job.message = "internal", f"grader error building the inputs: {e!r}"
            for name, arr in c.inputs.items():
                inputs[f"{job.k}/{name}"] = np.asarray(arr)
            jobs.append(job)
            per_test.setdefault(t.name, []).append(job)

    notes: list[str] = []
    status = "ok"
    missing = [c for c in part.cells if c not in sub_cells]
    forbidden = _forbidden_message(a, part, sub_cells)
    if forbidden:
        for j in jobs:
            j.outcome, j.message = "forbidden", forbidden
    if not forbidden and not missing and not_started(a, part, sub_cells):
        for j in jobs:
            if j.outcome == "pending":
                j.outcome, j.message = "error", f"{NOT_IMPLEMENTED} (the handout's cells, untouched)"
    cell_errors: list[tuple[str, str]] = []  # (cell id, message) of graded cells that raised
    rejected: list[str] = []                 # a stub reached, the grader patched: the part scores 0
    limits = sandbox.Limits(timeout_s=opts.timeout or part.timeout or a.timeout,
                            memory_mb=opts.memory_mb or a.memory_mb)
    groups: dict[tuple[str, ...], list[_Job]] = {}
    for j in jobs:                           # one child per set of stubs (most parts have one)
        groups.setdefault(tuple(sorted({*part.stubs, *j.test.stubs})), []).append(j)
    preload = a.child_imports()
    for stubs, group in groups.items():
        st = _run_group(a, part, sub_cells, ref, bad_cells, group, inputs, list(stubs), preload, limits, opts,
                        notes, cell_errors, rejected)
        status = worst(status, st)
    if ref is not None:          # a helper of the student's earlier cells is not there: say why
        earlier = [(q.id, c, sub_cells[c]) for q in a.parts[:a.parts.index(part)] for c in q.cells if c in sub_cells]
        cell_errors[:] = [(c, own_helper_hint(m, earlier)) for c, m in cell_errors]
        for j in jobs:
            j.message = own_helper_hint(j.message, earlier)
    if rejected and not forbidden:
        forbidden = rejected[0]
    # ---- verdicts, here in the parent --------------------------------------------------------------
    art_dir = Path(opts.artifacts_dir) if opts.artifacts_dir else None
    results = []
    judged: dict[str, list[tuple[Case, Verdict]]] = {}
    for t in tests:
        verdicts = judged[t.name] = []
        for j in per_test[t.name]:
            if j.outcome == "ok":
                ctx = VerdictContext(a, part, t, j.case, art_dir, opts.plot_timeline)
                try:
                    v = t.verdict(j.case, j.obs, ctx)
                    if not isinstance(v, Verdict):
                        raise TypeError(f"verdict returned {type(v).__name__}")
                except Exception as e:
                    print(f"autograder: verdict of {part.id}/{t.name} raised:\n{traceback.format_exc()}",
                          file=sys.stderr)
                    v = Verdict.fail(f"the grader could not check this result ({type(e).__name__}: {e}); "
                                     f"are the returned arrays of the expected kind?")
            else:
                v = Verdict.fail(j.message)
                if missing:
                    v = Verdict.fail(f"cell(s) {', '.join(repr(c) for c in missing)} are missing from the "
                                     f"notebook (deleted, or their metadata changed?); {j.message}")
                elif cell_errors and j.outcome == "error" and not j.message.startswith(NOT_IMPLEMENTED):
                    v = Verdict.fail(f"{_relevant_cell_error(cell_errors, t.name)}\n"
                                     f"(and then, running the test: {j.message})")
            verdicts.append((j.case, v))
            if v.reject and not forbidden:
                forbidden = f"{v.message}: the part scores 0"
    for t in tests:
        verdicts = judged[t.name]
        n = len(verdicts)
        passed = sum(v.passed for c, v in verdicts)
        if any(c.trivial for c, _ in verdicts) and not any(v.passed for c, v in verdicts if not c.trivial):
            passed = 0          # a case a do-nothing answer passes counts only beside a real one
        score = t.points if passed == n else (t.points * passed / n if t.partial else 0.0)
        fails = [(c, v) for c, v in verdicts if not v.passed]
        if fails:
            c, v = fails[0]
            msg = f"case {c.describe()}: {v.message}" if n > 1 or c.params else v.message
            if n > 1:
                msg += f"\n({len(fails)} of {n} cases failed)"
        else:
            msg = f"passed ({n} case{'s' if n != 1 else ''})"
        if forbidden:              # the same words for every test of the part: the report says them once
            msg, score, passed = forbidden, 0.0, 0
        arts = [p for _, v in verdicts for p in v.artifacts]
        metrics = {} if forbidden else {k: x for _, v in verdicts for k, x in v.metrics.items()}
        results.append(TestResult(part.id, t.name, float(t.points), round(float(score), 4), msg,
                                  t.visibility, arts, n, passed, metrics))
    if not cell_errors and not missing and not forbidden:
        _one_error_said_once(results, per_test)
    cells_unstarted = bool(cell_errors) and all(m.startswith(NOT_IMPLEMENTED) for _, m in cell_errors)
    if jobs and not forbidden and all(j.outcome == "error" and (j.message.startswith(NOT_IMPLEMENTED) or
                                                               cells_unstarted) for j in jobs):
        # (a cell that raised NotImplementedError at its top level defines nothing: its tests fail on names)
        said = ", ".join(f"'{c}'" for c in part.cells if c in sub_cells)
        for r in results:      # one message for the whole part, so the report says it once
            r.message = (f"{NOT_IMPLEMENTED}: this part is not started (its cells {said} still raise "
                         f"NotImplementedError)")
    return results, status, notes


# ---- one notebook ----------------------------------------------------------------------------------------
def grade_notebook(path: str | Path, a: Assignment, opts: GradeOptions | None = None,
                   name: str | None = None) -> SubmissionResult:
    opts = opts or GradeOptions()
    path = Path(path)
    t0 = time.monotonic()
    res = SubmissionResult(submission=name or path.stem, path=str(path), assignment=a.name,
                           sandbox=sandbox.capabilities().describe())
    try:
        sub = load_submission(path)
    except NotebookError as e:
        res.status, res.message = "error", f"could not grade: {e}"
        res.tests = _zero_tests(a, opts, f"not graded: {e}")
        res.execution_time = time.monotonic() - t0
        return res
    notes = []
    if sub.assignment and sub.assignment not in (a.id, a.name):
        notes.append(f"note: the notebook says it is assignment {sub.assignment!r}; graded as {a.name}")
    if sub.duplicates:
        notes.append(f"note: graded cells appear twice ({', '.join(sorted(set(sub.duplicates)))}); "
                     f"the first copy was graded")
    missing = [c for c in a.graded_cells() if c not in sub.cells]
    if missing:
        notes.append(f"missing graded cells: {', '.join(missing)} (tests that need them score 0)")
    try:
        ref = reference_cells(a)
    except Exception as e:
        res.status, res.message = "error", f"grader error: {e}"
        res.tests = _zero_tests(a, opts, f"not graded: {e}")
        return res
    if ref is None and a.solution:
        notes.append(NO_REFERENCE)
    bad_cells: set[str] = set()
    status = "ok"
    for part in a.parts:
        try:
            tests, st, part_notes = grade_part(a, part, sub.cells, opts, bad_cells, ref)
        except Exception as e:   # a grader bug must not stop a batch: this part scores 0, flagged
            print(f"autograder: grading {part.id} of {path} failed:\n{traceback.format_exc()}", file=sys.stderr)
            tests = [TestResult(part.id, t.name, float(t.points), 0.0, f"grader error: {type(e).__name__}: {e}",
                                t.visibility) for t in part.tests]
            st, part_notes = "error", []
        res.tests += tests
        status = worst(status, st)
        notes += part_notes
    res.status = status
    res.message = "\n".join(notes)
    res.execution_time = time.monotonic() - t0
    return res


def _zero_tests(a: Assignment, opts: GradeOptions, message: str) -> list[TestResult]:
    out = []
    for p in a.parts:
        tests = list(p.tests) + (a.hidden_tests().get(p.id, []) if opts.hidden else [])
        out += [TestResult(p.id, t.name, float(t.points), 0.0, message, t.visibility) for t in tests]
    return out
