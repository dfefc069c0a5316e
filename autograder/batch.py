"""Grading a folder of submissions: one grader process per submission, several at a time.

Each submission is graded by its own ``python -m autograder grade ... --result-file`` process, so
nothing one submission does (or any grader bug it triggers) can stop the batch: a process that dies
or runs past its limit yields a row with status "error" or "timeout" and the batch goes on.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from .results import SubmissionResult
from .spec import ROOT


@dataclass
class Entry:
    name: str
    notebook: Path | None
    problem: str = ""


def discover(folder: str | Path, expected_name: str | None = None) -> list[Entry]:
    """Submissions in `folder`: every top-level .ipynb, and every subfolder holding a notebook."""
    folder = Path(folder)
    entries = []
    for p in sorted(folder.iterdir()):
        if p.name.startswith("."):
            continue
        if p.is_file() and p.suffix == ".ipynb":
            entries.append(Entry(p.stem, p))
        elif p.is_dir():
            nbs = sorted(q for q in p.rglob("*.ipynb") if ".ipynb_checkpoints" not in q.parts)
            if len(nbs) == 1:
                entries.append(Entry(p.name, nbs[0]))
            elif not nbs:
                entries.append(Entry(p.name, None, "no notebook in the submission folder"))
            else:
                named = [q for q in nbs if expected_name and q.name == expected_name]
                if len(named) == 1:
                    entries.append(Entry(p.name, named[0]))
                else:
                    entries.append(Entry(p.name, None, "several notebooks, cannot tell which to grade: "
                                                       + ", ".join(q.name for q in nbs)))
    return entries


def _grade_one(entry: Entry, args: list[str], wall_s: float, artifacts: Path | None) -> SubmissionResult:
    if entry.notebook is None:
        return SubmissionResult(entry.name, "", "", status="error", message=f"could not grade: {entry.problem}")
    with tempfile.TemporaryDirectory(prefix="autograder-batch-") as tmp:
        out = Path(tmp) / "result.json"
        cmd = [sys.executable, "-m", "autograder", "grade", str(entry.notebook), "--name", entry.name,
               "--result-file", str(out), "--quiet", *args]
        if artifacts is not None:
            cmd += ["--artifacts", str(artifacts / entry.name)]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
        try:
            p = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               timeout=wall_s, env=env, start_new_session=True)
        except subprocess.TimeoutExpired:
            return SubmissionResult(entry.name, str(entry.notebook), "", status="timeout",
                                    message=f"could not grade: grading took longer than {wall_s:.0f} s")
        try:
            return SubmissionResult.from_dict(json.loads(out.read_text()))
        except (OSError, ValueError, TypeError) as e:
            err = p.stderr.decode(errors="replace")[-1500:]
            return SubmissionResult(entry.name, str(entry.notebook), "", status="error",
                                    message=f"could not grade: the grader process failed (exit {p.returncode}, "
                                            f"{type(e).__name__}).\n{err}")


def grade_folder(folder: str | Path, *, args: list[str], jobs: int, wall_s: float,
                 expected_name: str | None = None, artifacts: Path | None = None,
                 progress: bool = True) -> list[SubmissionResult]:
    from tqdm import tqdm
    entries = discover(folder, expected_name)
    results: list[SubmissionResult] = []
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool, \
            tqdm(total=len(entries), desc="grading", unit="submission", disable=not progress,
                 file=sys.stderr) as bar:
        futs = {pool.submit(_grade_one, e, args, wall_s, artifacts): e for e in entries}
        for f in as_completed(futs):
            e = futs[f]
            try:
                r = f.result()
            except Exception as exc:    # never lose the batch to one submission
                r = SubmissionResult(e.name, str(e.notebook or ""), "", status="error",
                                     message=f"could not grade: {type(exc).__name__}: {exc}")
            results.append(r)
            bar.set_postfix_str(f"{r.submission}: {r.score:g}/{r.max_score:g}", refresh=False)
            bar.update()
    return sorted(results, key=lambda r: r.submission)
