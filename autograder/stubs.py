"""The child's minigrad without what a part asks students to write: every such name is a stub that raises.

A part lists, in ``Part.stubs``, the parts of minigrad it asks students to write again (``"minigrad.optim.AdamW"``,
a whole module ``"minigrad.utils.checkpoint"``, a method ``"minigrad.amp.GradScaler.unscale_"``). The child
that grades that part imports a copy of minigrad in which each of them is rewritten, at the source, into a
stub whose body raises ``StudentWrittenError``: the class or function is still there (minigrad imports and
subclasses it), but calling it, by whatever route a graded cell found (an import, ``operator.attrgetter``,
``sys.modules``, a name built at run time, reading the file and ``exec``-ing it), ends in the same message.
The original code is nowhere in the child's copy: not in the source, not in its bytecode.

Names are resolved here, in the parent, against the real minigrad: a public name (``minigrad.optim.AdamW``)
is rewritten where it is defined (``minigrad/optim/adam.py``, class ``AdamW``), so a spec names what
students see and keeps working when minigrad moves code between its modules. The static scan
(``forbidden.py``) stays: it gives the line-precise message before anything runs.
"""
from __future__ import annotations

import ast
import importlib
import inspect
import py_compile
from dataclasses import dataclass
from pathlib import Path

ERROR = "StudentWrittenError"

#: written into the child's minigrad copy as ``minigrad/_grading_stub.py`` (only there, never in minigrad)
STUB_MODULE = '''"""Only in the grader's copy of minigrad: what a stubbed class or function raises."""


class StudentWrittenError(RuntimeError):
    """A graded cell reached a part of minigrad that the assignment asks students to write."""


def refuse(name):
    raise StudentWrittenError(
        f"`{name}` is what this assignment asks you to write yourself: the grader's copy of minigrad "
        f"leaves it out, so your code must not call it (by any route); use your own code")
'''
_CALL = "__import__('minigrad._grading_stub', fromlist=['refuse']).refuse({name!r})"


@dataclass(frozen=True)
class Target:
    file: str           # relative to the minigrad package folder, "optim/adam.py"
    qualname: str       # "AdamW", "GradScaler.unscale_", or "" for every definition of the module
    name: str           # the name the spec gave (said in the error)


def resolve(name: str) -> Target:
    """Where a dotted minigrad name is defined. Raises ValueError when it names nothing."""
    if not name.startswith("minigrad"):
        raise ValueError(f"stub {name!r}: only names in minigrad can be stubbed")
    parts = name.split(".")
    for i in range(len(parts), 0, -1):          # the longest importable module prefix
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            try:
                obj = inspect.getattr_static(obj, attr)
            except AttributeError:
                raise ValueError(f"stub {name!r}: {'.'.join(parts[:i])} has no {attr!r}") from None
            obj = getattr(obj, "__func__", obj)       # staticmethod / classmethod
        break
    else:
        raise ValueError(f"stub {name!r}: no such module")
    pkg = Path(importlib.import_module("minigrad").__file__).resolve().parent
    if inspect.ismodule(obj):
        return Target(Path(obj.__file__).resolve().relative_to(pkg).as_posix(), "", name)
    if not (inspect.isclass(obj) or inspect.isfunction(obj)):
        raise ValueError(f"stub {name!r}: a stub is a module, class or function, not a {type(obj).__name__}")
    module = importlib.import_module(obj.__module__)
    return Target(Path(module.__file__).resolve().relative_to(pkg).as_posix(), obj.__qualname__, name)


def _refusal(name: str) -> list[ast.stmt]:
    return ast.parse(_CALL.format(name=name)).body


def _stub_function(node, name: str) -> None:
    doc = node.body[:1] if (node.body and isinstance(node.body[0], ast.Expr)
                            and isinstance(node.body[0].value, ast.Constant)
                            and isinstance(node.body[0].value.value, str)) else []
    node.body = doc + _refusal(name)


def _stub_class(node: ast.ClassDef, name: str) -> None:
    has_init = False
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
            _stub_function(item, f"{name}.{item.name}")
            has_init |= item.name == "__init__"
        elif isinstance(item, ast.ClassDef):
            _stub_class(item, f"{name}.{item.name}")
    if not has_init:                    # an instance can't be made either (ops are made without __init__)
        init = ast.parse("def __init__(self, *args, **kwargs):\n    pass\n").body[0]
        _stub_function(init, name)
        node.body.append(init)


def _find(body, qualname: str):
    head, _, rest = qualname.partition(".")
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == head:
            if not rest:
                return node
            return _find(node.body, rest) if isinstance(node, ast.ClassDef) else None
    return None


def stub_source(source: str, targets: list[Target]) -> str:
    """The module's source with every target's code replaced by a refusal (line numbers are not kept)."""
    tree = ast.parse(source)
    # a whole module: not what its own top level calls or registers (`_local = _Local()`, `register(hook)`),
    # which would fail at import; those are machinery, not what students write
    used = {n.id for stmt in tree.body if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            for n in ast.walk(stmt) if isinstance(n, ast.Name)}
    for t in targets:
        if not t.qualname:
            for node in tree.body:
                if getattr(node, "name", None) in used:
                    continue
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    _stub_function(node, f"{t.name}.{node.name}")
                elif isinstance(node, ast.ClassDef):
                    _stub_class(node, f"{t.name}.{node.name}")
            continue
        node = _find(tree.body, t.qualname)
        if node is None:
            raise ValueError(f"stub {t.name!r}: {t.qualname} not found in minigrad/{t.file}")
        (_stub_class if isinstance(node, ast.ClassDef) else _stub_function)(node, t.name)
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


_resolved: dict[str, Target] = {}
_sources: dict[tuple, str] = {}


def targets(names) -> list[Target]:
    out = []
    for n in names:
        if n not in _resolved:
            _resolved[n] = resolve(n)
        out.append(_resolved[n])
    return out


def apply(minigrad_dir: Path, names) -> list[str]:
    """Rewrite the copy of minigrad in `minigrad_dir` so every name in `names` is a stub; returns the files
    changed. Their bytecode is rewritten too, so nothing of the original code is left in the copy."""
    by_file: dict[str, list[Target]] = {}
    for t in targets(sorted(set(names))):
        by_file.setdefault(t.file, []).append(t)
    if not by_file:
        return []
    (minigrad_dir / "_grading_stub.py").write_text(STUB_MODULE)
    changed = ["_grading_stub.py"]
    for rel, ts in by_file.items():
        path = minigrad_dir / rel
        key = (str(path.name), rel, tuple(ts))
        if key not in _sources:
            _sources[key] = stub_source(path.read_text(), ts)
        path.write_text(_sources[key])
        changed.append(rel)
    for rel in changed:
        path = minigrad_dir / rel
        for old in path.parent.glob(f"__pycache__/{path.stem}.*.pyc"):
            old.unlink()
        py_compile.compile(str(path), doraise=True)
    return changed
