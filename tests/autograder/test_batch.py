"""The command line, and batch grading: parallel, with a progress bar, never stopped by a submission."""
import csv
import json
import os
import subprocess
import sys

import pytest

from autograder.spec import ROOT
from ag_support import FULL, HOSTILE, SOLUTION_NB, submission


@pytest.fixture(autouse=True)
def _cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)      # default outputs (results/artifacts) land in the test's folder


def cli(*args, timeout=600):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "autograder", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env=env)


def test_grade_one_notebook_prints_table_and_writes_reports(tmp_path):
    p = cli("grade", SOLUTION_NB, "--json", tmp_path / "r.json", "--csv", tmp_path / "g.csv")
    assert p.returncode == 0, p.stderr
    assert "a0_demo - a0_demo: 10 / 10 points" in p.stdout
    assert "part2: gradient" in p.stdout and "3 / 3" in p.stdout
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["score"] == data["max_score"] == 10 and len(data["tests"]) == 4
    rows = list(csv.DictReader(open(tmp_path / "g.csv")))
    assert rows[0]["status"] == "ok" and rows[0]["score"] == "10"


def test_assignment_inferred_from_metadata_or_filename(tmp_path):
    no_meta = submission(tmp_path / "a0_work.ipynb", assignment=None)
    assert cli("grade", no_meta, "-q", "--json", tmp_path / "r.json").returncode == 0
    assert json.loads((tmp_path / "r.json").read_text())["score"] == 10
    anon = submission(tmp_path / "homework.ipynb", assignment=None)
    p = cli("grade", anon)
    assert p.returncode == 2 and "pass --assignment" in p.stderr
    assert cli("grade", anon, "--assignment", "a0", "-q").returncode == 0


def test_list_and_sandbox_info():
    assert "a0_demo" in cli("list").stdout
    assert "process limit" in cli("sandbox-info").stdout


@pytest.mark.slow
def test_batch_survives_every_kind_of_bad_submission(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    submission(subs / "alice.ipynb")
    submission(subs / "bob.ipynb", {"a0-square": "def square(x):\n    return x\n"})
    (subs / "carol.ipynb").write_text("not a notebook")
    (subs / "dave").mkdir()
    submission(subs / "dave" / "a0_demo.ipynb")
    (subs / "erin").mkdir()
    submission(subs / "erin" / "one.ipynb")
    submission(subs / "erin" / "two.ipynb")
    (subs / "frank").mkdir()
    for name in ("kill_parent", "os_exit", "loop_in_function", "fake_output"):
        submission(subs / f"h_{name}.ipynb", script=HOSTILE / f"{name}.py")
    p = cli("grade", subs, "--assignment", "a0", "--jobs", 2, "--timeout", 3, "--csv", tmp_path / "g.csv",
            "--json", tmp_path / "r.json")
    assert p.returncode == 0, p.stderr
    assert "grading" in p.stderr and "100%" in p.stderr            # the tqdm bar
    rows = {r["submission"]: r for r in csv.DictReader(open(tmp_path / "g.csv"))}
    assert set(rows) == {"alice", "bob", "carol", "dave", "erin", "frank", "h_kill_parent", "h_os_exit",
                         "h_loop_in_function", "h_fake_output"}
    assert rows["alice"]["score"] == "10" and rows["dave"]["score"] == "10"
    assert rows["bob"]["score"] == "8" and rows["bob"]["part1/forward"] == "0"
    assert rows["carol"]["status"] == "error" and rows["carol"]["score"] == "0"
    assert rows["erin"]["status"] == "error" and rows["frank"]["status"] == "error"
    assert rows["h_os_exit"]["status"] == "crashed" and rows["h_os_exit"]["score"] == "7"
    assert rows["h_loop_in_function"]["status"] == "timeout" and rows["h_loop_in_function"]["score"] == "8"
    assert rows["h_fake_output"]["score"] == "8"
    # with Landlock the signal is refused (full marks); without, its grader dies: an error row, 0 points
    assert (rows["h_kill_parent"]["status"], rows["h_kill_parent"]["score"]) in (("ok", "10"), ("error", "0"))
    assert list(rows["alice"])[:4] == ["submission", "score", "max_score", "status"]
    assert set(list(rows["alice"])[4:]) == set(FULL)
    data = json.loads((tmp_path / "r.json").read_text())
    assert {s["submission"] for s in data["submissions"]} == set(rows)
    assert "several notebooks" in next(s["output"] for s in data["submissions"] if s["submission"] == "erin")
