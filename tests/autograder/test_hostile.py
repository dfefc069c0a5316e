"""The containment corpus (hostile/): each submission costs only the tests it attacks, gets a clear
message, never yields a forged score, and leaves nothing behind. Batch behaviour: test_batch.py."""
import os
import re
import time
from pathlib import Path

import pytest

from autograder import sandbox
from autograder.spec import ROOT
from ag_support import FULL, HOSTILE, get_test, scores

LANDLOCK = sandbox.capabilities().landlock_abi > 0
needs_landlock = pytest.mark.skipif(not LANDLOCK, reason="filesystem/signal isolation needs Landlock")
needs_process_limit = pytest.mark.skipif(sandbox.capabilities().process_limit is None,
                                         reason="no process limit on this machine: fork bombs not run")
TIMEOUT = 4.0

# file -> (tests that must score 0: {key: message pattern}, submission status)
EXPECT = {
    "loop_in_function": ({"part1/forward": r"ran past the part's time limit of \d+ s"}, "timeout"),
    "loop_at_import": ({"part2/gradient": r"while running cell 'a0-square-backward', it ran past the part's time"},
                       "timeout"),
    "huge_allocation": ({"part1/forward": r"MemoryError.*8\.00 TiB", "part4/packing": r"MemoryError"}, "ok"),
    "sys_exit": ({"part1/forward": r"raised SystemExit.*sys\.exit",
                  "part4/packing": r"SystemExit in cell 'a0-pack'"}, "ok"),
    "os_exit": ({"part2/gradient": r"exited with code 0 before the grader finished"}, "crashed"),
    "base_exceptions": ({"part1/forward": r"raised KeyboardInterrupt", "part2/gradient": r"raised SystemExit",
                         "part4/packing": r"Sneaky: not an Exception"}, "ok"),
    "fork_bomb": ({"part1/forward": r"square\(x\): output wrong"}, "ok"),
    "setsid_escape": ({}, "ok"),
    "monkeypatch": ({"part1/forward": r"uses `autograder`, which no graded cell may use"}, "ok"),   # refused as read
    "fake_output": ({"part1/forward": r"square\(x\): output wrong at index"}, "ok"),
    "write_outside": ({}, "ok"),
    "read_secrets": ({"part1/forward": r"got -1"}, "ok"),
    "noisy": ({"part1/forward": r"more output than the sandbox allows",
               "part4/packing": r"MemoryError|File too large|could not be read"}, "ok"),
    "syntax_error": ({"part1/forward": r"SyntaxError in cell 'a0-square': expected ':'"}, "ok"),
    "ignore_signals": ({"part1/forward": r"time limit|CPU time limit"}, "timeout"),
}
MARKS = {
    "fork_bomb": [needs_process_limit],
    "write_outside": [needs_landlock],
    "read_secrets": [needs_landlock],
    "loop_in_function": [pytest.mark.slow], "loop_at_import": [pytest.mark.slow],
    "ignore_signals": [pytest.mark.slow],
}


def leftovers(wait_s: float = 3.0) -> list[str]:
    """Processes started in a sandbox whose folder is gone (a live sandbox still has its folder)."""
    deadline = time.monotonic() + wait_s
    while True:
        found = []
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                raw = Path(f"/proc/{d}/cmdline").read_bytes().decode(errors="replace")
                state = Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            for arg in raw.split("\0"):
                m = re.match(r"^(/.*/autograder-box-[^/]+)/", arg)
                if m and state != "Z" and not Path(m.group(1)).exists():
                    found.append(f"{d}: {raw.replace(chr(0), ' ')[:160]}")
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def test_corpus_is_complete():
    assert {p.stem for p in HOSTILE.glob("*.py")} == set(EXPECT) | {"kill_parent"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=MARKS.get(n, [])) for n in EXPECT])
def test_hostile_submission_is_contained(name, make_sub, grade):
    lost, status = EXPECT[name]
    r = grade(make_sub(script=HOSTILE / f"{name}.py", name=name), timeout=TIMEOUT)
    # only the attacked tests are lost; everything else keeps full marks
    assert scores(r) == {**FULL, **{k: 0 for k in lost}}, r
    for key, pattern in lost.items():
        assert re.search(pattern, get_test(r, key).message, re.S), get_test(r, key).message
    assert r.status == status
    assert all(0 <= t.score <= t.points for t in r.tests) and r.max_score == 10
    assert not leftovers(), "processes outlived their sandbox"


@needs_process_limit
def test_fork_bomb_stays_under_the_process_limit(make_sub, grade):
    r = grade(make_sub(script=HOSTILE / "fork_bomb.py"), timeout=TIMEOUT)
    # pack() forks up to 2000 sleeping children and answers correctly only if it got fewer than 100
    assert get_test(r, "part4/packing").passed
    got = int(re.search(r"got (\d+)", get_test(r, "part1/forward").message).group(1))
    assert got <= 10


@needs_landlock
def test_writes_outside_the_sandbox_do_not_land(make_sub, grade):
    mark = "autograder-hostile-write-outside"
    candidates = [Path("/tmp") / mark, ROOT / mark, ROOT.parent / mark, ROOT / ".venv" / mark]
    for c in candidates:
        c.unlink(missing_ok=True)
    grade(make_sub(script=HOSTILE / "write_outside.py"), timeout=TIMEOUT)
    written = [c for c in candidates if c.exists()]
    for c in written:
        c.unlink()
    assert not written


def test_printed_scores_never_reach_the_report(make_sub, grade):
    r = grade(make_sub(script=HOSTILE / "fake_output.py"), timeout=TIMEOUT)
    text = r.message + "".join(t.message for t in r.tests)
    assert "Score: 100/100" not in text and "PASSED: square is correct" not in text
    assert r.score == 8


def test_out_dir_cannot_be_listed_and_foreign_files_are_ignored(make_sub, grade):
    """The child may drop files into its result folder, but cannot list it to learn the token's file
    names; files under other names are never read."""
    src = ("import os\n"
           "for n in ['0.json', '0.npz', 'done', 'cells.json', 'results.json']:\n"
           "    try:\n        open(os.path.join('..', 'out', n), 'w').write('{\"ok\": true}')\n"
           "    except OSError:\n        pass\n"
           "try:\n    LISTED = os.listdir('../out')\nexcept OSError as e:\n    LISTED = None\n"
           "def square(x):\n    return x * x + (0 if LISTED is None else 1)\n")
    r = grade(make_sub({"a0-square": src}), timeout=TIMEOUT)
    if LANDLOCK:
        assert scores(r) == FULL        # the listing failed, and the planted files changed nothing
    else:
        assert scores(r) == {**FULL, "part1/forward": 0}
