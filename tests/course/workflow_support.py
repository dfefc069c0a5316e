"""Running the course's make targets in a copy of the repository, as a student or an instructor would.

The copy uses this test run's virtual environment (``VENV=...``, its install stamp taken as up to date
with ``make -o``), so nothing is installed; ``python -m autograder`` and ``import minigrad`` resolve to
the copy's own packages because make runs them from the copy's root.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

from autograder.release import tracked_files
from autograder.spec import ROOT

VENV = Path(sys.executable).parent.parent


def copy_repo(dst: Path, root: Path = ROOT, skip=()) -> Path:
    """The instructor repository's files (as git would commit them) under `dst`."""
    for rel in tracked_files(root, untracked=True):
        if not rel.startswith(tuple(skip)):
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / rel, dst / rel)
    return dst


def make(repo: Path, *targets: str, timeout=300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "AUTOGRADER_SPEC_PATH"))}
    stamp = VENV / ".installed-dev"
    return subprocess.run(["make", "--no-print-directory", "-o", str(stamp), f"VENV={VENV}", *targets],
                          cwd=repo, env=env, capture_output=True, text=True, timeout=timeout)
