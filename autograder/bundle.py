"""The Gradescope autograder zip, and what runs inside it.

``python -m autograder gradescope-bundle a1`` writes ``dist/a1_autograd_gradescope.zip`` holding

    setup.sh          makes /autograder/venv with requirements.txt (pinned numpy, ml_dtypes, nbformat, tqdm, and
                      what the assignment's grading needs: ``needs(a)``); Gradescope runs it once (the image)
    run_autograder    Gradescope runs it per submission: grades /autograder/submission with the hidden
                      cases and writes /autograder/results/results.json, with that environment's Python
    minigrad/         the library (imported from the source folder; no demos, no corpora)
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

from .spec import PACKAGE_DIR, Assignment

SETUP_SH = """\
#!/usr/bin/env bash
# Gradescope runs this once when it builds the autograder image (as root). Newer Gradescope images refuse
# system-wide pip installs (PEP 668), so everything goes into a virtual environment, $ROOT/venv, with the
# versions the bundle was built and tested with (requirements.txt: numpy needs Python >= 3.11, so pick
# Gradescope's Ubuntu 24.04 base image). AUTOGRADER_ROOT replaces /autograder and AUTOGRADER_SETUP_PYTHON
# the interpreter the environment is made from (the tests use both); pip's own PIP_* variables apply.
set -euo pipefail
cd "$(dirname "$0")"
ROOT="${AUTOGRADER_ROOT:-/autograder}"
PYTHON="${AUTOGRADER_SETUP_PYTHON:-python3}"
if ! "$PYTHON" -c "import ensurepip, venv" >/dev/null 2>&1; then
    apt-get update -y && apt-get install -y python3 python3-venv
fi
"$PYTHON" -m venv "$ROOT/venv"
"$ROOT/venv/bin/python" -m pip install --no-cache-dir -r requirements.txt
"$ROOT/venv/bin/python" -c "import numpy, nbformat, tqdm; print('autograder environment ready:', numpy.__version__)"
"""

#: What grading needs besides the standard library; pinned to the versions installed where the bundle is
#: built (so Gradescope grades with what the instructor tested).
REQUIREMENTS = ("numpy", "ml_dtypes", "nbformat", "tqdm")   # ml_dtypes: minigrad's bfloat16

RUN_AUTOGRADER = """\
#!/usr/bin/env bash
# Gradescope runs this for every submission (as /autograder/run_autograder, from /autograder).
# It must always leave {root}/results/results.json behind; the Python side writes a zero-score
# results.json with an explanation if grading fails.
set -uo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
PYTHON="${{AUTOGRADER_PYTHON:-$ROOT/venv/bin/python}}"
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


def _add_tree(zf: zipfile.ZipFile, src: Path, arc: str, skip: tuple[str, ...] = ()) -> None:
    for p in sorted(src.rglob("*")):
        rel = p.relative_to(src).as_posix()
        if "__pycache__" in p.parts or p.suffix == ".pyc" or not p.is_file() or rel.startswith(skip):
            continue
        zf.write(p, f"{arc}/{rel}")


def _imported_modules(a: Assignment) -> set[str]:
    """Top-level modules the spec (and its private packages and hidden cases) import, anywhere in a file."""
    import ast
    files = [f for p in a.spec_paths() for f in ([p] if p.is_file() else sorted(p.rglob("*.py")))]
    files += [Path(a.hidden_file)] if Path(a.hidden_file).is_file() else []
    mods = set()
    for f in files:
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Import):
                mods |= {n.name.split(".")[0] for n in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                mods.add(node.module.split(".")[0])
    return mods - set(sys.stdlib_module_names) - {"autograder", "minigrad"}


def needs(a: Assignment | None = None) -> list[str]:
    """The distributions grading `a` needs: numpy, ml_dtypes, nbformat, tqdm, those its spec declares
    (``Assignment.requirements``: a4's scikit-learn, which minigrad.datasets imports), and the installed
    distributions of the third-party modules its files import (optional ones, such as threadpoolctl
    behind a try, only when installed here)."""
    from importlib.metadata import packages_distributions
    out = list(REQUIREMENTS)
    if a is not None:
        dists = packages_distributions()
        found = [d for m in sorted(_imported_modules(a)) for d in dists.get(m, [])[:1]]
        for name in [*a.requirements, *found]:
            if name.lower() not in {o.lower() for o in out}:
                out.append(name)
    return out


def requirements(a: Assignment | None = None) -> str:
    """requirements.txt: every need pinned to the version installed where the bundle is built."""
    from importlib.metadata import PackageNotFoundError, version
    lines = []
    for name in needs(a):
        try:
            lines.append(f"{name}=={version(name)}\n")
        except PackageNotFoundError:
            raise RuntimeError(f"{a.name if a else 'grading'} needs {name}, which is not installed here: "
                               f"pip install {name}, test, then build the bundle") from None
    return "".join(lines)


def _import_names(dists: list[str]) -> list[str]:
    """The module each distribution is imported as (scikit-learn -> sklearn)."""
    from importlib.metadata import packages_distributions
    by_dist = {}
    for mod, ds in sorted(packages_distributions().items()):
        for d in ds:
            if not mod.startswith("_"):
                by_dist.setdefault(d.lower(), mod)
    return [by_dist.get(d.lower(), d.replace("-", "_")) for d in dists]


#: minigrad's parts that grading never imports: the demos and the data they train on
MINIGRAD_SKIP = ("examples/", "datasets/data/")


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
        need = needs(a)
        _add_text(zf, "setup.sh", SETUP_SH.replace("import numpy, nbformat, tqdm;",
                                                   f"import {', '.join(_import_names(need))};"), executable=True)
        _add_text(zf, "run_autograder", RUN_AUTOGRADER.format(assignment=a.name, root="/autograder"),
                  executable=True)
        _add_text(zf, "requirements.txt", requirements(a))
        mg = minigrad_dir()
        if mg is None:
            raise FileNotFoundError("minigrad is not importable; cannot bundle it")
        _add_tree(zf, mg, "minigrad", skip=MINIGRAD_SKIP)
        for p in sorted(PACKAGE_DIR.glob("*.py")) + [PACKAGE_DIR / "README.md"]:
            if p.exists():
                zf.write(p, f"autograder/{p.name}")
        _add_text(zf, "autograder/assignments/__init__.py", "")
        for spec in a.spec_paths():                 # the spec and its private _aN_* packages
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
