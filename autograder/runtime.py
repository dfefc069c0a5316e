"""The runtime copy a child imports from: minigrad, the harness and the spec, never the repository.

Built once per grading process and per spec; every child gets a fresh copy of it (`sandbox.run_child`)."""
from __future__ import annotations

import atexit
import importlib.util
import shutil
import tempfile
from pathlib import Path

from .spec import PACKAGE_DIR

CHILD_FILES = ["spec.py", "verdicts.py", "_child.py", "_landlock.py", "_guard.py"]   # the harness, what specs import


_templates: dict[str, Path] = {}
_template_root: Path | None = None


def _cleanup_templates():
    if _template_root is not None:
        shutil.rmtree(_template_root, ignore_errors=True)


def minigrad_dir() -> Path | None:
    spec = importlib.util.find_spec("minigrad")
    if spec is None:
        return None
    locs = list(spec.submodule_search_locations or [])
    return Path(locs[0]) if locs else None


def runtime_template(spec_file: str, extra: list | None = None) -> Path:
    """A folder with what every child of this assignment imports; built once per grading process. `extra`:
    the spec's private sibling packages (``Assignment.spec_paths()``), copied next to it."""
    global _template_root
    key = str(Path(spec_file).resolve())
    if key in _templates:
        return _templates[key]
    if _template_root is None:
        _template_root = Path(tempfile.mkdtemp(prefix="autograder-runtime-"))
        atexit.register(_cleanup_templates)
    t = _template_root / f"t{len(_templates)}"
    ag = t / "autograder"
    (ag / "assignments").mkdir(parents=True)
    (ag / "__init__.py").write_text('"""The autograder inside the sandbox: only what spec modules import."""\n\n\n'
                                    'def check(*args, **kwargs):\n    """Self-checks do nothing while grading."""\n')
    (ag / "assignments" / "__init__.py").write_text("")
    for name in CHILD_FILES:
        shutil.copy2(PACKAGE_DIR / name, ag / name)
    for spec in [Path(spec_file), *(Path(p) for p in extra or [])]:
        if spec.is_dir():                               # a package: its modules, not its caches
            shutil.copytree(spec, ag / "assignments" / spec.name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(spec, ag / "assignments" / spec.name)
    mg = minigrad_dir()
    if mg is not None:
        shutil.copytree(mg, t / "minigrad", ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "tests"))
    import compileall
    compileall.compile_dir(str(t), quiet=2, workers=1)   # children run with -B; ship bytecode ready
    _templates[key] = t
    return t


def site_dirs() -> list[str]:
    """Folders the child needs on sys.path besides the stdlib: wherever numpy is installed."""
    import numpy
    return [str(Path(numpy.__file__).resolve().parent.parent)]
