"""The runtime copy a child imports from: minigrad (less the part's stubs), the harness and the spec, never
the repository.

A template is built once per content: its folder is named by a hash of every file that goes in (minigrad,
the harness files, the spec and its private packages) and of the part's stubs, so grading processes share
it, and a change to any of those files makes a new one. Where the child cannot write what it reads
(Landlock, or a sandbox user other than the template's owner) every child reads the template itself and
templates live in a cache folder shared by all grading processes (``$AUTOGRADER_CACHE``, default
``/tmp/autograder-cache-<uid>``); elsewhere each grading process keeps its own templates and every child
gets a fresh copy, so no child can change what a later one imports.
"""
from __future__ import annotations

import atexit
import hashlib
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

from .spec import PACKAGE_DIR

CHILD_FILES = ["spec.py", "verdicts.py", "_child.py", "_landlock.py", "_guard.py"]   # the harness, what specs import
CACHE_ENV = "AUTOGRADER_CACHE"

_templates: dict[tuple, Path] = {}
_private_root: Path | None = None


def _cleanup_templates():
    if _private_root is not None:
        _rmtree(_private_root)


def minigrad_dir() -> Path | None:
    spec = importlib.util.find_spec("minigrad")
    if spec is None:
        return None
    locs = list(spec.submodule_search_locations or [])
    return Path(locs[0]) if locs else None


def shared() -> bool:
    """Can children read one template without being able to change it?"""
    from .containment import capabilities
    caps = capabilities()
    return bool(caps.landlock_abi or caps.sandbox_user)


def _sources(spec_file: str, extra) -> list[tuple[str, Path]]:
    """(path in the template, file) for everything a template holds."""
    out = [(f"autograder/{n}", PACKAGE_DIR / n) for n in CHILD_FILES]
    for spec in [Path(spec_file), *(Path(p) for p in extra or [])]:
        if spec.is_dir():
            out += [(f"autograder/assignments/{spec.name}/{f.relative_to(spec).as_posix()}", f)
                    for f in sorted(spec.rglob("*")) if f.is_file() and "__pycache__" not in f.parts]
        else:
            out.append((f"autograder/assignments/{spec.name}", spec))
    mg = minigrad_dir()
    if mg is not None:
        out += [(f"minigrad/{f.relative_to(mg).as_posix()}", f) for f in sorted(mg.rglob("*"))
                if f.is_file() and "__pycache__" not in f.parts and "tests" not in f.relative_to(mg).parts
                and f.suffix != ".pyc"]
    return out


def _build(dst: Path, sources, stubs, base: Path | None = None) -> None:
    if base is not None:                 # the template without stubs, compiled: copy it, rewrite the stubs only
        shutil.copytree(base, dst)
        for p in [dst, *dst.rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)
        from .stubs import apply
        apply(dst / "minigrad", stubs)
        for p in [dst, *dst.rglob("*")]:
            p.chmod(0o555 if p.is_dir() else 0o444)
        return
    ag = dst / "autograder"
    (ag / "assignments").mkdir(parents=True)
    (ag / "__init__.py").write_text('"""The autograder inside the sandbox: only what spec modules import."""\n\n\n'
                                    'def check(*args, **kwargs):\n    """Self-checks do nothing while grading."""\n')
    (ag / "assignments" / "__init__.py").write_text("")
    for rel, f in sources:
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, dst / rel)
    if stubs:
        from .stubs import apply
        apply(dst / "minigrad", stubs)
    import compileall
    compileall.compile_dir(str(dst), quiet=2, workers=1)   # children run with -B; ship bytecode ready
    for p in [dst, *dst.rglob("*")]:                         # read-only: what every child of it imports
        p.chmod(0o555 if p.is_dir() else 0o444)


def runtime_template(spec_file: str, extra: list | None = None, stubs=()) -> Path:
    """A folder with what every child of this assignment (and these stubs) imports. `extra`: the spec's
    private sibling packages (``Assignment.spec_paths()``), copied next to it."""
    global _private_root
    key = (str(Path(spec_file).resolve()), tuple(map(str, extra or [])), tuple(sorted(stubs)), shared())
    if key in _templates and _templates[key].is_dir():
        return _templates[key]
    sources = _sources(spec_file, extra)
    h = hashlib.sha256(repr(sorted(stubs)).encode())
    for rel, f in sources:
        h.update(rel.encode() + b"\0" + f.read_bytes() + b"\0")
    name = "t-" + h.hexdigest()[:24]
    if shared():
        root = Path(os.environ.get(CACHE_ENV) or Path(tempfile.gettempdir()) / f"autograder-cache-{os.geteuid()}")
        root.mkdir(parents=True, exist_ok=True)
        root.chmod(0o755)
    else:
        if _private_root is None:
            _private_root = Path(tempfile.mkdtemp(prefix="autograder-runtime-"))
            atexit.register(_cleanup_templates)
        root = _private_root
    final = root / name
    if not (final / "autograder" / "_child.py").is_file():
        base = runtime_template(spec_file, extra) if stubs else None
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))
        try:
            _build(tmp / "t", sources, stubs, base)
            (tmp / "t").chmod(0o755)
            try:
                os.rename(tmp / "t", final)          # atomic: a concurrent grader may have made it first
            except OSError:
                if not (final / "autograder" / "_child.py").is_file():
                    raise
            else:
                final.chmod(0o555)
        finally:
            _rmtree(tmp)
    _templates[key] = final
    return final


def _rmtree(path: Path) -> None:
    """Remove a folder even where it is read-only (templates) or a student made parts of it unreadable
    (sandbox folders: sandbox.py)."""
    def fix(func, p, _exc):
        try:
            os.chmod(os.path.dirname(p), 0o700)
            os.chmod(p, 0o700)
            func(p)
        except OSError:
            pass
    shutil.rmtree(path, onerror=fix)


def site_dirs() -> list[str]:
    """Folders the child needs on sys.path besides the stdlib: wherever numpy is installed."""
    import numpy
    return [str(Path(numpy.__file__).resolve().parent.parent)]
