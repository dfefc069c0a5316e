"""The Gradescope zip: its members, and run_autograder against a fake /autograder root."""
import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile

import pytest

from autograder.bundle import build_bundle
from ag_support import HOSTILE, SOLUTION_NB, submission


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    from autograder.spec import load_assignment
    return build_bundle(load_assignment("a0"), tmp_path_factory.mktemp("dist"))


def test_bundle_members(bundle):
    with zipfile.ZipFile(bundle) as zf:
        names = set(zf.namelist())
        mode = {i.filename: i.external_attr >> 16 for i in zf.infolist()}
        run = zf.read("run_autograder").decode()
        setup = zf.read("setup.sh").decode()
    assert {"setup.sh", "run_autograder", "requirements.txt", "autograder/__main__.py",
            "autograder/grader.py", "autograder/_child.py", "autograder/assignments/a0_demo.py",
            "autograder/hidden/a0_demo.py", "solutions/a0_demo.ipynb"} <= names
    assert any(n.startswith("minigrad/") for n in names)
    assert not any(n.startswith(("minigrad/examples/", "minigrad/datasets/data/")) for n in names), \
        "only what grading needs: no demos, no corpora"
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
    assert mode["run_autograder"] & stat.S_IXUSR and mode["setup.sh"] & stat.S_IXUSR
    assert run.startswith("#!/usr/bin/env bash")
    for path in ('ROOT="${AUTOGRADER_ROOT:-/autograder}"', 'SUBMISSION="$ROOT/submission"',
                 'RESULTS="$ROOT/results/results.json"', 'cd "$SOURCE"', "gradescope-run --assignment a0_demo"):
        assert path in run
    assert '-m venv "$ROOT/venv"' in setup and "pip install --no-cache-dir -r requirements.txt" in setup
    assert 'PYTHON="${AUTOGRADER_PYTHON:-$ROOT/venv/bin/python}"' in run
    with zipfile.ZipFile(bundle) as zf:
        reqs = zf.read("requirements.txt").decode().split()
    assert sorted(r.split("==")[0] for r in reqs) == ["ml_dtypes", "nbformat", "numpy", "tqdm"]
    assert all("==" in r for r in reqs)


def _fake_root(tmp_path, bundle, notebooks):
    root = tmp_path / "autograder"
    (root / "source").mkdir(parents=True)
    (root / "submission").mkdir()
    with zipfile.ZipFile(bundle) as zf:
        zf.extractall(root / "source")
    for name, src in notebooks.items():
        shutil.copyfile(src, root / "submission" / name)
    run = root / "source" / "run_autograder"
    run.chmod(0o755)      # Gradescope keeps the zip's mode; extractall does not
    return root


def _run(root):
    env = {"PATH": os.environ["PATH"], "AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": sys.executable,
           "HOME": str(root)}
    p = subprocess.run([str(root / "source" / "run_autograder")], cwd=root, env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads((root / "results" / "results.json").read_text())


def test_run_autograder_grades_with_hidden_cases(tmp_path, bundle):
    data = _run(_fake_root(tmp_path, bundle, {"a0_demo.ipynb": SOLUTION_NB}))
    assert data["score"] == data["max_score"] == 11            # hidden test included
    assert {t["name"] for t in data["tests"]} >= {"part1: forward", "part1: large values"}
    assert all(t["status"] == "passed" for t in data["tests"])


def test_run_autograder_always_writes_results(tmp_path, bundle):
    data = _run(_fake_root(tmp_path, bundle, {}))
    assert data["score"] == 0 and "no notebook found" in data["output"]


def test_run_autograder_contains_hostile_code(tmp_path, bundle):
    nb = submission(tmp_path / "h.ipynb", script=HOSTILE / "fake_output.py")
    data = _run(_fake_root(tmp_path, bundle, {"a0_demo.ipynb": nb}))
    assert data["score"] == 8 and data["max_score"] == 11     # part1: forward (2) and large values (1) lost


def test_setup_sh_makes_a_venv_and_run_autograder_grades_with_it(tmp_path, bundle):
    """setup.sh as Gradescope runs it, offline: pip installs the pinned requirements into $ROOT/venv from
    wheels of this environment's own distributions; run_autograder then grades with that venv alone."""
    from wheelhouse import wheelhouse
    root = _fake_root(tmp_path, bundle, {"a0_demo.ipynb": SOLUTION_NB})
    (root / "source" / "setup.sh").chmod(0o755)
    wheels = wheelhouse(["numpy", "ml_dtypes", "nbformat", "tqdm"], tmp_path / "wheels")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "AUTOGRADER_ROOT": str(root),
           "AUTOGRADER_SETUP_PYTHON": sys.executable, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels),
           "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    p = subprocess.run([str(root / "source" / "setup.sh")], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "autograder environment ready" in p.stdout
    venv_python = root / "venv" / "bin" / "python"
    site = subprocess.run([str(venv_python), "-c", "import numpy, sys; print(numpy.__file__); print(sys.prefix)"],
                          capture_output=True, text=True).stdout
    assert str(root / "venv") in site, "installed into the venv, not system-wide"
    env = {"PATH": os.environ["PATH"], "AUTOGRADER_ROOT": str(root), "HOME": str(root)}   # no AUTOGRADER_PYTHON
    p = subprocess.run([str(root / "source" / "run_autograder")], cwd=root, env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    data = json.loads((root / "results" / "results.json").read_text())
    assert data["score"] == data["max_score"] == 11, data


def test_each_bundle_pins_what_its_assignment_needs(tmp_path):
    """a4's part 5 trains on scikit-learn's digits (through minigrad.datasets): its bundle pins
    scikit-learn and setup.sh checks it imports; a0 needs only the base three."""
    from autograder.bundle import needs
    from autograder.spec import load_assignment
    a4 = load_assignment("a4")
    assert "scikit-learn" in needs(a4)
    assert needs(load_assignment("a0")) == ["numpy", "ml_dtypes", "nbformat", "tqdm"]
    with zipfile.ZipFile(build_bundle(a4, tmp_path)) as zf:
        reqs = zf.read("requirements.txt").decode().split()
        setup = zf.read("setup.sh").decode()
    assert any(r.startswith("scikit-learn==") for r in reqs) and all("==" in r for r in reqs), reqs
    assert "import numpy, ml_dtypes, nbformat, tqdm, sklearn" in setup


def test_an_undeclared_import_of_a_spec_is_found(tmp_path):
    """A third-party module a spec imports (here inside a function) is a need too, when installed."""
    from autograder.bundle import needs
    from autograder.spec import load_assignment
    spec = tmp_path / "a9_plots.py"
    spec.write_text("from autograder.spec import Assignment\n\n\ndef draw():\n    import matplotlib\n\n\n"
                    "ASSIGNMENT = Assignment(id='a9', name='a9_plots', title='t', parts=[])\n")
    assert "matplotlib" in needs(load_assignment(str(spec)))


def _split_spec(d):
    """A single-file spec a9_split.py whose observe imports its helper from the private _a9_split/."""
    (d / "_a9_split").mkdir(parents=True)
    (d / "_a9_split" / "__init__.py").write_text("")
    (d / "_a9_split" / "helpers.py").write_text("def twice(x):\n    return 2 * x\n")
    (d / "_a8_other").mkdir()
    (d / "_a8_other" / "__init__.py").write_text("")
    (d / "a9_split.py").write_text(
        "from autograder.spec import Assignment, Part, Test, Verdict\n\n\n"
        "def observe_f(ns, case):\n"
        "    from autograder.assignments._a9_split.helpers import twice   # in the child\n"
        "    return {'y': twice(ns.f(3))}\n\n\n"
        "def verdict_f(case, obs, ctx):\n"
        "    return Verdict(int(obs['y']) == 6, f\"twice(f(3)) = {int(obs['y'])}\")\n\n\n"
        "ASSIGNMENT = Assignment(id='a9', name='a9_split', title='t', notebook='a9_split.ipynb', parts=[\n"
        "    Part('part1', 'f', cells=['a9-f'], names=['f'], tests=[\n"
        "        Test('f', 1, observe_f, verdict_f, None, cases=[{}])])])\n")
    return d / "a9_split.py"


def test_a_graded_child_imports_the_specs_private_package(tmp_path):
    from ag_nbtools import write_notebook
    from autograder.grader import GradeOptions, grade_notebook
    from autograder.spec import load_assignment
    a = load_assignment(str(_split_spec(tmp_path / "assignments")))
    nb = write_notebook(tmp_path / "a9_split.ipynb", [("code", "a9-f", "def f(x):\n    return x")], "a9")
    r = grade_notebook(nb, a, GradeOptions(artifacts_dir=tmp_path / "art"))
    assert r.score == r.max_score == 1, [(t.key, t.message) for t in r.tests]


def test_private_sibling_packages_of_a_spec_travel_with_it(tmp_path):
    """A single-file spec's helpers in autograder/assignments/_aN_<topic>/ reach the sandbox's runtime
    and the bundle, as a spec package's modules do."""
    from autograder.runtime import runtime_template
    from autograder.spec import load_assignment
    a = load_assignment(str(_split_spec(tmp_path / "assignments")))
    assert [p.name for p in a.spec_paths()] == ["a9_split.py", "_a9_split"]
    t = runtime_template(a.spec_file, [str(p) for p in a.spec_paths()[1:]])
    assert (t / "autograder" / "assignments" / "_a9_split" / "helpers.py").is_file()
    assert not (t / "autograder" / "assignments" / "_a8_other").exists()
    with zipfile.ZipFile(build_bundle(a, tmp_path / "dist")) as zf:
        names = set(zf.namelist())
    assert {"autograder/assignments/a9_split.py", "autograder/assignments/_a9_split/helpers.py"} <= names
    assert not any("_a8_other" in n for n in names)
