"""Grading results and their three outputs: a text table, Gradescope's results.json, a CSV gradebook."""
from __future__ import annotations

import csv
import json
import textwrap
from dataclasses import asdict, dataclass, field
from pathlib import Path

STATUSES = ("ok", "crashed", "timeout", "error")   # worst last


def worst(*statuses: str) -> str:
    return max(statuses, key=STATUSES.index) if statuses else "ok"


@dataclass
class TestResult:
    part: str
    name: str
    points: float
    score: float
    message: str = ""
    visibility: str = "visible"
    artifacts: list[str] = field(default_factory=list)
    cases: int = 0
    cases_passed: int = 0
    metrics: dict = field(default_factory=dict)   # what the verdicts measured (a11's leaderboard reads them)

    @property
    def key(self) -> str:
        return f"{self.part}/{self.name}"

    @property
    def passed(self) -> bool:
        return self.score >= self.points - 1e-9

    @property
    def status(self) -> str:
        return "passed" if self.passed else "failed"


@dataclass
class SubmissionResult:
    submission: str                  # a name: the notebook stem or the submission folder
    path: str
    assignment: str
    tests: list[TestResult] = field(default_factory=list)
    status: str = "ok"               # ok | crashed | timeout | error (see STATUSES)
    message: str = ""                # submission-wide notes (missing cells, why it could not be graded)
    execution_time: float = 0.0
    sandbox: str = ""                # what the sandbox enforced on this machine

    @property
    def score(self) -> float:
        return round(sum(t.score for t in self.tests), 4)

    @property
    def max_score(self) -> float:
        return round(sum(t.points for t in self.tests), 4)

    # ---- serialisation (batch workers hand results back as JSON) ----------------------------------
    def to_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict) -> "SubmissionResult":
        d = dict(d)
        d["tests"] = [TestResult(**t) for t in d.get("tests", [])]
        return SubmissionResult(**d)

    def to_gradescope(self) -> dict:
        out = {
            "score": self.score,
            "max_score": self.max_score,
            "execution_time": round(self.execution_time, 3),
            "visibility": "visible",
            "stdout_visibility": "hidden",
            "tests": [{
                "name": f"{t.part}: {t.name}",
                "score": round(t.score, 4),
                "max_score": t.points,
                "status": t.status,
                "output": t.message,
                "visibility": t.visibility,
            } for t in self.tests],
        }
        if self.message:
            out["output"] = self.message
        return out


def _fmt(x: float) -> str:
    return f"{x:g}"


def format_report(r: SubmissionResult, *, details: bool = True, width: int = 100) -> str:
    lines = [f"{r.assignment} - {r.submission}: {_fmt(r.score)} / {_fmt(r.max_score)} points"
             f"  [{r.status}, {r.execution_time:.1f} s]"]
    if r.message:
        lines += ["  " + ln for ln in r.message.splitlines()]
    if r.tests:
        w = max(len(f"{t.part}: {t.name}") for t in r.tests)
        lines.append(f"  {'test'.ljust(w)}  {'points':>9}  result")
        for t in r.tests:
            pts = f"{_fmt(t.score)} / {_fmt(t.points)}"
            res = "passed" if t.passed else ("partial" if t.score > 0 else "FAILED")
            lines.append(f"  {f'{t.part}: {t.name}'.ljust(w)}  {pts:>9}  {res}")
    failed = [t for t in r.tests if not t.passed]
    if details and failed:
        lines.append("  Feedback:")
        groups: dict[tuple[str, str], list[TestResult]] = {}
        for t in failed:           # tests of a part that failed for one reason are explained once
            groups.setdefault((t.part, t.message), []).append(t)
        for (part, message), ts in groups.items():
            lines.append(f"  * {part}: {', '.join(t.name for t in ts)}")
            for para in message.splitlines() or [""]:
                lines.append(textwrap.indent(para, "      ") if para.startswith(" ") else
                             textwrap.fill(para, width, initial_indent="      ", subsequent_indent="      ",
                                           break_on_hyphens=False, break_long_words=False))
            for a in (a for t in ts for a in t.artifacts):
                lines.append(f"      see {a}")
    return "\n".join(lines)


def write_json(results: list[SubmissionResult], path: str | Path) -> None:
    """One submission: Gradescope's results.json. Several: {"submissions": [{"submission": ..., ...}]}."""
    if len(results) == 1:
        data = results[0].to_gradescope()
    else:
        data = {"submissions": [{"submission": r.submission, "status": r.status, **r.to_gradescope()}
                                for r in results]}
    Path(path).write_text(json.dumps(data, indent=2) + "\n")


def write_csv(results: list[SubmissionResult], path: str | Path) -> None:
    """A gradebook: one row per submission, a column per test (its score)."""
    keys: list[str] = []
    for r in results:
        for t in r.tests:
            if t.key not in keys:
                keys.append(t.key)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["submission", "score", "max_score", "status", *keys])
        for r in sorted(results, key=lambda r: r.submission):
            by = {t.key: t.score for t in r.tests}
            w.writerow([r.submission, _fmt(r.score), _fmt(r.max_score), r.status,
                        *[_fmt(by[k]) if k in by else "" for k in keys]])
