"""The layers depend downward only: the core never imports a feature, and no two modules import each other.

Read from the source (every ``import``, module-level or inside a function), so a lazy import that
hides an upward dependency fails here too. ``import minigrad`` (or ``from minigrad import name``) inside
minigrad depends on the whole package -- every layer -- and counts as such; ``from . import submodule``
needs only the package object and counts as a dependency on the submodule alone.
"""
import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PKG = ROOT / "minigrad"

CORE = ("minigrad.tensor", "minigrad.tensor_base", "minigrad.autograd", "minigrad.ops", "minigrad.backend",
        "minigrad.errors", "minigrad.creation", "minigrad.random")
FEATURES = ("minigrad.nn", "minigrad.optim", "minigrad.memory", "minigrad.amp", "minigrad.distributed",
            "minigrad.compiler", "minigrad.profiler", "minigrad.utils", "minigrad.datasets",
            "minigrad.examples", "minigrad.serialization", "minigrad.inference", "minigrad.onnx",
            "minigrad.safetensors_io", "minigrad.budget", "minigrad.as_torch", "minigrad.func", "autograder", "tools")


def _module_name(path):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_module(name):
    path = ROOT / name.replace(".", "/")
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _imports(path):
    """Absolute names of the modules ``path`` depends on: ``from x import y`` counts x.y when y is a module,
    x itself when y is a name defined in x (x's ``__init__`` must have run to define it)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module
            for alias in node.names:
                sub = f"{mod}.{alias.name}"
                found.add(sub if _is_module(sub) else mod)
    return {m for m in found if m.split(".")[0] in ("minigrad", "autograder", "tools")}


MODULES = {_module_name(p): _imports(p) for p in sorted(PKG.rglob("*.py"))}


def _within(name, prefixes):
    return any(name == p or name.startswith(p + ".") for p in prefixes)


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _within(m, CORE)))
def test_core_module_imports_no_feature_layer(module):
    upward = sorted(m for m in MODULES[module] if _within(m, FEATURES))
    assert not upward, f"{module} (core) imports the feature layer(s) {upward}: register at an extension " \
                       f"point instead (minigrad/autograd/extensions.py)"


# No exemptions: every module imports what it uses from where it lives.
EXEMPT = set()


def test_no_import_cycles_between_modules():
    """Every import is a dependency, an upward ``import minigrad`` included (see the module docstring)."""
    graph = {m: {d for d in deps if d in MODULES and d != m and (m, d) not in EXEMPT}
             for m, deps in MODULES.items()}
    cycles = [c for c in _strongly_connected(graph) if len(c) > 1]
    assert not cycles, "modules that import each other: " + "; ".join(" <-> ".join(sorted(c)) for c in cycles)


def _strongly_connected(graph):
    """Tarjan's algorithm, iterative."""
    index, low, on_stack, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    out.append(component)
    return out
