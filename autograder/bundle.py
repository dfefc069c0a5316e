"""The Gradescope autograder zip, and what runs inside it.

``python -m autograder gradescope-bundle a1`` writes ``dist/a1_autograd_gradescope.zip`` holding

    setup.sh          installs Python, numpy and minigrad (Gradescope runs it once, building the image)
    run_autograder    Gradescope runs it per submission: grades /autograder/submission with the hidden
                      cases and writes /autograder/results/results.json
    pyproject.toml, README.md, minigrad/     the package (installed by setup.sh)
    autograder/       the grader, this assignment's spec, and its hidden cases
    solutions/...     the solution notebook (the reference substituted for earlier parts)

Gradescope unpacks the zip into /autograder/source. run_autograder makes that folder readable by root
only, so a grader that drops to an unprivileged sandbox user keeps hidden cases and solutions out of
reach even where Landlock is unavailable. ``AUTOGRADER_ROOT`` replaces /autograder (used by the tests).
"""
from __future__ import annotations

import json
import shutil
import stat
import sys
import tempfile
import time
import traceback
import zipfile
from pathlib import Path

from .spec import PACKAGE_DIR, ROOT, Assignment

SETUP_SH = """\
#!/usr/bin/env bash
# Gradescope runs this once when it builds the autograder image.
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v python3 >/dev/null || ! python3 -m pip --version >/dev/null 2>&1; then
    apt-get update -y && apt-get install -y python3 python3-pip python3-venv
fi
python3 -m pip install --upgrade pip
python3 -m pip install "numpy>=1.26,<3" "tqdm>=4.60" "nbformat>=5.9" "matplotlib>=3.7"
python3 -m pip install .          # minigrad (pyproject.toml in this folder)
"""

RUN_AUTOGRADER = """\
#!/usr/bin/env bash
# Gradescope runs this for every submission (as /autograder/run_autograder, from /autograder).
# It must always leave {root}/results/results.json behind; the Python side writes a zero-score
# results.json with an explanation if grading fails.
set -uo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
PYTHON="${{AUTOGRADER_PYTHON:-python3}}"
SOURCE="$ROOT/source"
SUBMISSION="$ROOT/submission"
RESULTS="$ROOT/results/results.json"
mkdir -p "$ROOT/results"
# Hidden cases and the reference solution live in $SOURCE: readable by root only from here on.
chmod -R go-rwx "$SOURCE" 2>/dev/null || true
cd "$SOURCE"
"$PYTHON" -m autograder gradescope-run --assignment {assignment} --submission "$SUBMISSION" --results "$RESULTS"
status=$?
if [ ! -s "$RESULTS" ]; then
    printf '{{"score": 0, "output": "The autograder failed before grading (exit %s). Please tell the course staff."}}\\n' "$status" > "$RESULTS"
fi
exit 0
"""

CHILD_AND_PARENT = ["__init__.py", "__main__.py", "README.md"]


def _add_tree(zf: zipfile.ZipFile, src: Path, arc: str) -> None:
    for p in sorted(src.rglob("*")):
        if "__pycache__" in p.parts or p.suffix == ".pyc" or not p.is_file():
            continue
        zf.write(p, f"{arc}/{p.relative_to(src).as_posix()}")


def _add_text(zf: zipfile.ZipFile, arc: str, text: str, executable: bool = False) -> None:
    info = zipfile.ZipInfo(arc, date_time=(2024, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = ((0o755 if executable else 0o644) | stat.S_IFREG) << 16
    zf.writestr(info, text)


def build_bundle(a: Assignment, out_dir: Path) -> Path:
    from .sandbox import minigrad_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{a.name}_gradescope.zip"
    sol = a.solution_path()
    if a.solution and sol is None:
        raise FileNotFoundError(f"{a.name}: solution notebook {a.solution} not found")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        _add_text(zf, "setup.sh", SETUP_SH, executable=True)
        _add_text(zf, "run_autograder", RUN_AUTOGRADER.format(assignment=a.name, root="/autograder"),
                  executable=True)
        pyproject = ROOT / "pyproject.toml"
        if pyproject.exists():
            zf.write(pyproject, "pyproject.toml")
        readme = ROOT / "README.md"
        if readme.exists():
            zf.write(readme, "README.md")
        else:
            _add_text(zf, "README.md", "minigrad (packaged for the course autograder)\n")
        mg = minigrad_dir()
        if mg is None:
            raise FileNotFoundError("minigrad is not importable; cannot bundle it")
        _add_tree(zf, mg, "minigrad")
        for p in sorted(PACKAGE_DIR.glob("*.py")) + [PACKAGE_DIR / "README.md"]:
            if p.exists():
                zf.write(p, f"autograder/{p.name}")
        _add_text(zf, "autograder/assignments/__init__.py", "")
        spec = Path(a.spec_file)
        if spec.is_dir():
            _add_tree(zf, spec, f"autograder/assignments/{spec.name}")
        else:
            zf.write(spec, f"autograder/assignments/{spec.name}")
        if Path(a.hidden_file).exists():
            zf.write(a.hidden_file, f"autograder/hidden/{Path(a.hidden_file).name}")
        if sol is not None:
            zf.write(sol, a.solution)
    return path


# ---- inside Gradescope ------------------------------------------------------------------------------------
def _find_notebook(submission: Path, expected: str) -> Path:
    nbs = sorted(p for p in submission.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    named = [p for p in nbs if p.name == expected]
    if named:
        return named[0]
    if len(nbs) == 1:
        return nbs[0]
    if not nbs:
        raise FileNotFoundError(f"no notebook found in your submission (expected {expected})")
    raise FileNotFoundError(f"several notebooks submitted ({', '.join(p.name for p in nbs)}); "
                            f"submit only {expected}")


def gradescope_run(assignment: str, submission: Path, results: Path) -> int:
    """Grade the one notebook in `submission` (hidden cases included) and write results.json."""
    from .grader import GradeOptions, grade_notebook
    from .spec import load_assignment
    t0 = time.monotonic()
    results.parent.mkdir(parents=True, exist_ok=True)
    try:
        a = load_assignment(assignment)
        nb = _find_notebook(submission, a.notebook)
        with tempfile.TemporaryDirectory(prefix="autograder-sub-") as tmp:
            local = Path(tmp) / nb.name
            shutil.copyfile(nb, local)
            res = grade_notebook(local, a, GradeOptions(hidden=True, artifacts_dir=results.parent / "artifacts"),
                                 name=nb.stem)
        data = res.to_gradescope()
        if res.sandbox:
            print(f"sandbox: {res.sandbox}", file=sys.stderr)
    except Exception as e:
        traceback.print_exc()
        data = {"score": 0, "execution_time": round(time.monotonic() - t0, 3),
                "output": f"The autograder could not grade this submission: {e}"}
    results.write_text(json.dumps(data, indent=2) + "\n")
    return 0
