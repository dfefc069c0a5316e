"""A class's leaderboard, measured by the grader and re-run by it for the top entries (the CS336 habit).

A spec opts in with a module-level ``LEADERBOARD`` dict (a11_capstone's)::

    LEADERBOARD = {"test": "part2/time under the budget",   # its verdict's metrics hold the number ranked
                   "metric": "cpu_s", "lower_is_better": True,
                   "qualify": ["part2/reaches the validation loss", "part2/fits the budget"],   # full marks
                   "top": 3, "repeats": 3,                  # entries re-run, children per entry
                   "control": {"a11-train": "def train(*args, **kwargs):\\n    pass\\n"},
                   "review_above": {"speed_vs_plain": 1.5}}   # a note: faster than training can be

After a class is graded (``grade FOLDER -a aN --csv/--json``), the entries with full marks on ``qualify`` are
ranked by the metric their grading measured. Nothing the student's notebook says about its own speed is
read. The ``top`` best are then re-run here, one at a time (nothing else of the batch runs meanwhile), each
``repeats`` times in a fresh sandbox child that runs what grading ran for that test (the preamble, the
reference of the earlier parts, the student's cells of the part) and the test's public case only, so no
case's result can be reused. Each child's CPU seconds are read from the kernel (``RUSAGE_CHILDREN`` of this
process around the child, out of the child's reach), less those of a control child whose cells are the
``control`` stand-ins (the interpreter, the imports, the preamble). The re-run's verdict must pass again, or
the entry is listed as not reproduced. Entries are ranked by the median of those kernel-counted seconds; the
child's own timing of the run (its clocks, bound before student code) is shown beside it, and an entry whose
kernel seconds are far above it (work done outside the timed call, e.g. while its cells ran), or whose
metrics pass ``review_above`` (a11: faster than the plain float32 loop, which no honest run under a smaller
budget is), gets a note for the instructor.
"""
from __future__ import annotations

import csv
import json
import resource
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .results import SubmissionResult

COLUMNS = ["rank", "submission", "score", "status", "verified_s", "child_s", "first_pass_s", "speed_vs_plain",
           "peak", "budget", "val_loss", "runs", "note"]


@dataclass
class Row:
    submission: str
    score: float
    first_pass_s: float
    path: str = ""
    metrics: dict = field(default_factory=dict)
    status: str = "not re-run"          # verified | not reproduced | not re-run
    verified_s: float | None = None     # median CPU seconds the kernel counted, less the control's
    child_s: float | None = None        # median of the child's own timing in the re-runs
    runs: list = field(default_factory=list)
    note: str = ""
    rank: int = 0

    def record(self) -> dict:
        m = self.metrics
        return {"rank": self.rank, "submission": self.submission, "score": self.score, "status": self.status,
                "verified_s": _r(self.verified_s), "child_s": _r(self.child_s), "first_pass_s": _r(self.first_pass_s),
                "speed_vs_plain": _r(m.get("speed_vs_plain")), "peak": m.get("peak"), "budget": m.get("budget"),
                "val_loss": _r(m.get("val_loss")), "runs": len(self.runs), "note": self.note}


def _r(x, digits=4):
    return None if x is None else round(float(x), digits)


def board_of(a) -> dict | None:
    """The spec's LEADERBOARD dict, or None when the assignment has no leaderboard."""
    return getattr(sys.modules.get(a.module_name), "LEADERBOARD", None)


def first_pass(board: dict, results: list[SubmissionResult]) -> list[Row]:
    """Qualifying entries, best first, by what grading measured."""
    rows = []
    for r in results:
        tests = {t.key: t for t in r.tests}
        t = tests.get(board["test"])
        if r.status != "ok" or t is None or not t.passed or board["metric"] not in t.metrics:
            continue
        if all(k in tests and tests[k].passed for k in board["qualify"]):
            rows.append(Row(r.submission, r.score, float(t.metrics[board["metric"]]), r.path, dict(t.metrics)))
    rows.sort(key=lambda row: row.first_pass_s, reverse=not board.get("lower_is_better", True))
    return rows


def _kernel_cpu(run):
    """(CPU seconds the kernel counted for the children reaped during ``run()``, its result)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = run()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime), out


def _job(a, board, cells_of_part: dict[str, str], timeout: float | None):
    """A function that runs the board's test, public case, in one fresh child; returns its observation."""
    from . import sandbox
    from .grader import _cells_for, reference_cells
    part_id, test_name = board["test"].split("/", 1)
    part = a.part(part_id)
    test = next(t for t in part.tests if t.name == test_name)
    case = test.public_cases()[0]
    case.inputs = dict(test.inputs(case.params)) if test.inputs else {}
    cells = _cells_for(a, part, cells_of_part, reference_cells(a), set())
    limits = sandbox.Limits(timeout_s=timeout or part.timeout or a.timeout, memory_mb=a.memory_mb)

    def run():
        out = sandbox.run_child(
            spec_file=a.spec_file, spec_module=a.module_name, cells=cells,
            jobs=[{"k": 0, "observe": test.observe.__name__, "params": case.params, "label": case.label}],
            inputs={f"0/{k}": v for k, v in case.inputs.items()}, limits=limits,
            spec_extra=[str(p) for p in a.spec_paths()[1:]], stubs=sorted({*part.stubs, *test.stubs}),
            preload=a.child_imports())
        return out.observations.get(0)
    return run, part, test, case


def rerun(a, board: dict, rows: list[Row], *, top: int | None = None, repeats: int | None = None,
          timeout: float | None = None, log=print) -> list[Row]:
    """Re-run the `top` best rows `repeats` times each (see the module docstring); rank every row."""
    from .grader import VerdictContext
    from .notebook import load_submission
    top = board.get("top", 3) if top is None else top
    repeats = max(1, board.get("repeats", 3) if repeats is None else repeats)
    chosen = rows[:top]
    if chosen:
        control_cells = dict(board.get("control", {}))
        run, part, test, case = _job(a, board, control_cells, timeout)
        control = statistics.median(_kernel_cpu(run)[0] for _ in range(repeats))
        log(f"leaderboard: control child {control:.2f} s of CPU (interpreter, imports, preamble)")
    for row in chosen:
        run, part, test, case = _job(a, board, load_submission(row.path).cells, timeout)
        kernel, child, seen = [], [], {}
        for _ in range(repeats):
            cpu, obs = _kernel_cpu(run)
            v = test.verdict(case, obs, VerdictContext(a, part, test, case, None)) if obs is not None else None
            row.runs.append(round(cpu - control, 4))
            if v is None or not v.passed:
                row.status, row.note = "not reproduced", (v.message if v is not None else "the re-run did not "
                                                          "report a result")[:300]
                break
            kernel.append(cpu - control)
            child.append(float(v.metrics.get(board["metric"], float("nan"))))
            for key in board.get("review_above", {}):
                seen.setdefault(key, []).append(float(v.metrics.get(key, float("nan"))))
        else:
            row.status = "verified"
            row.verified_s, row.child_s = statistics.median(kernel), statistics.median(child)
            if row.verified_s > 1.5 * row.child_s + 0.5:
                row.note = (f"the kernel counted {row.verified_s:.2f} s beyond the control, the timed call "
                            f"{row.child_s:.2f} s: work done outside train()")
            for key, limit in board.get("review_above", {}).items():
                if statistics.median(seen[key]) > limit:
                    row.note = (row.note + "; " if row.note else "") + (
                        f"{key} {statistics.median(seen[key]):.2f} > {limit}: faster than it can be by "
                        f"training, read its code")
        log(f"leaderboard: {row.submission}: {row.status} {row.runs}")
    verified = sorted((r for r in chosen if r.status == "verified"), key=lambda r: r.verified_s,
                      reverse=not board.get("lower_is_better", True))
    ordered = verified + [r for r in chosen if r.status != "verified"] + rows[top:]
    for i, r in enumerate(ordered, 1):
        r.rank = i
    return ordered


def format_board(rows: list[Row], board: dict) -> str:
    lines = [f"leaderboard ({board['test']}: CPU seconds, lower is better; verified = re-run by the grader)",
             f"{'#':>3}  {'submission':24} {'status':15} {'verified s':>10} {'child s':>8} {'first s':>8} note"]
    for r in rows:
        lines.append(f"{r.rank:>3}  {r.submission[:24]:24} {r.status:15} {_fmt(r.verified_s):>10} "
                     f"{_fmt(r.child_s):>8} {_fmt(r.first_pass_s):>8} {r.note[:80]}")
    return "\n".join(lines)


def _fmt(x):
    return "-" if x is None else f"{x:.3f}"


def write(rows: list[Row], *, csv_path=None, json_path=None) -> list[Path]:
    """``<report>-leaderboard.csv`` next to the CSV gradebook; a ``"leaderboard"`` list in the batch's JSON."""
    out = []
    if csv_path:
        p = Path(csv_path)
        p = p.with_name(f"{p.stem}-leaderboard.csv")
        with open(p, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=COLUMNS)
            w.writeheader()
            for r in rows:
                w.writerow(r.record())
        out.append(p)
    if json_path:
        p = Path(json_path)
        data = json.loads(p.read_text()) if p.is_file() else {}
        data["leaderboard"] = [r.record() for r in rows]      # beside "submissions" (or a single result's keys)
        p.write_text(json.dumps(data, indent=2) + "\n")
        out.append(p)
    return out


def for_class(a, results: list[SubmissionResult], *, top=None, repeats=None, timeout=None, csv_path=None,
              json_path=None, log=print) -> list[Row] | None:
    """The whole step after a class is graded: None when the assignment has no leaderboard."""
    board = board_of(a)
    if board is None:
        return None
    rows = rerun(a, board, first_pass(board, results), top=top, repeats=repeats, timeout=timeout, log=log)
    write(rows, csv_path=csv_path, json_path=json_path)
    return rows


__all__ = ["Row", "board_of", "first_pass", "for_class", "format_board", "rerun", "write"]
