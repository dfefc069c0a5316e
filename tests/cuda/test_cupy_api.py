"""The real CuPy (cupy-cuda12x, imported without a GPU) against what minigrad uses of it, so the fakes the other
tests run on can't drift from the library:

* every call the fake CuPy modules recorded while the fake harness ran (tests/cupy_calls.py; ``make
  test-cuda`` runs the harness with MINIGRAD_CUPY_CALL_LOG set) names something real CuPy has, binds to its
  signature, and passes arguments its C types accept (``int ndev, bytes commId``...);
* every CuPy name in minigrad's source (``cupy.cuda.X``, ``nccl.X``, ``xp.X`` on the array module) exists, and
  the keywords minigrad passes are accepted (code under ``if xp.__name__ == "numpy":`` is NumPy's alone);
* the fakes' NCCL constants have the real values, and every kernel call the harness recorded is one of the
  type bindings the kernel catalogue declares (so NVRTC compiled what runs).
"""
import ast
import importlib
import importlib.util
import inspect
import os
import pathlib
import re
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.append(str(ROOT / "tests"))
import cupy_calls  # noqa: E402  (tests/cupy_calls.py)

CALL_LOG = os.environ.get("MINIGRAD_CUPY_CALL_LOG", str(ROOT / "build" / "cupy-calls"))
pytestmark = pytest.mark.usefixtures("toolchain")

_INTS = {"int", "long", "long long", "unsigned", "unsigned int", "unsigned long", "unsigned long long", "size_t",
         "ssize_t", "Py_ssize_t", "intptr_t", "uintptr_t", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t",
         "uint16_t", "uint32_t", "uint64_t"}
_PY_TYPED = {"bytes", "str", "tuple", "list", "dict"}   # Cython-typed Python objects (None passes too)


# --- the real signatures --------------------------------------------------------------------------
def resolve(path):
    """The real object named ``path`` ('cupy.cuda.nccl.NcclCommunicator.allReduce'); LookupError if none."""
    parts = path.split(".")
    obj, name = importlib.import_module(parts[0]), parts[0]
    for part in parts[1:]:
        name += "." + part
        if hasattr(obj, part):
            obj = getattr(obj, part)
            continue
        try:
            obj = importlib.import_module(name)
        except ImportError:
            raise LookupError(f"{path}: real CuPy has no {name}") from None
    return obj


def _split_params(text):
    depth, item, items = 0, "", []
    for ch in text:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            items.append(item.strip())
            item = ""
        else:
            item += ch
    return items + [item.strip()] if item.strip() else items


def _from_docstring(doc, name):
    """(Signature, {param: C type}) from Cython's embedded signature ('allReduce(self, intptr_t sendbuf, ...)')."""
    first = (doc or "").strip().splitlines()[0] if (doc or "").strip() else ""
    m = re.match(r"^(?:[\w.]+\.)?" + re.escape(name) + r"\((.*)\)\s*(?:->.*)?$", first.replace("\\", ""))
    if not m:
        return None
    params, ctypes, kind = [], {}, inspect.Parameter.POSITIONAL_OR_KEYWORD
    for item in _split_params(m.group(1)):
        decl, _, default = item.partition("=")
        if decl.strip() == "*":
            kind = inspect.Parameter.KEYWORD_ONLY
            continue
        if decl.strip() == "/":
            params = [q.replace(kind=inspect.Parameter.POSITIONAL_ONLY) for q in params]
            continue
        *ctype, pname = decl.split()
        if pname.startswith("**"):
            params.append(inspect.Parameter(pname[2:], inspect.Parameter.VAR_KEYWORD))
            continue
        if pname.startswith("*"):
            params.append(inspect.Parameter(pname[1:], inspect.Parameter.VAR_POSITIONAL))
            kind = inspect.Parameter.KEYWORD_ONLY
            continue
        ctypes[pname] = " ".join(ctype) or None
        params.append(inspect.Parameter(pname, kind, default=default.strip() if default else
                                        inspect.Parameter.empty))
    return inspect.Signature(params), ctypes


def signature(obj, name):
    """(Signature without ``self``, {param: C type or None}) of a real CuPy callable; None if unreadable."""
    import cupy
    if isinstance(obj, cupy.ufunc):   # x1..xn, outputs by position or out=, dtype=, casting=
        P = inspect.Parameter
        params = [P(f"x{i}", P.POSITIONAL_ONLY) for i in range(obj.nin)]
        params += [P(f"out{i}", P.POSITIONAL_ONLY, default=None) for i in range(obj.nout)]
        params += [P(k, P.KEYWORD_ONLY, default=None) for k in ("out", "dtype", "casting")]
        return inspect.Signature(params), {}
    found = _from_docstring(getattr(obj, "__doc__", None), name)
    if found is None:
        try:
            found = inspect.signature(obj), {}
        except (TypeError, ValueError):
            return None
    sig, ctypes = found
    params = list(sig.parameters.values())
    if params and params[0].name == "self":
        sig = sig.replace(parameters=params[1:])
    return sig, ctypes


def accepts(ctype, described):
    """Does a parameter of C type ``ctype`` take a value described as ``described`` (cupy_calls.describe)?"""
    if ctype in _INTS:
        return described in ("int", "bool") or re.fullmatch(r"numpy\.u?int\d+|numpy\.bool_?", described) is not None
    if ctype in ("double", "float"):
        return described in ("int", "float", "bool") or described.startswith("numpy.")
    if ctype in _PY_TYPED:
        return described in (ctype, "NoneType")
    return True   # untyped, bint, or a class of CuPy's own (the fakes pass their stand-ins)


def check_call(call):
    """Problems (strings) with one recorded call against the real CuPy."""
    name = call["name"]
    try:
        obj = resolve(name)
    except LookupError as e:
        return [str(e)]
    if not callable(obj):   # a property or constant read
        return [] if not call["args"] and not call["kwargs"] else [f"{name} is not callable in CuPy"]
    found = signature(obj, name.rsplit(".", 1)[-1])
    if found is None:
        return [f"{name}: cannot read CuPy's signature"]
    sig, ctypes = found
    try:
        bound = sig.bind(*call["args"], **call["kwargs"])
    except TypeError as e:
        return [f"{name}{sig}: called with ({', '.join(call['args'])}"
                f"{''.join(f', {k}={v}' for k, v in call['kwargs'].items())}): {e}"]
    return [f"{name}: parameter {p} is {ctypes[p]} in CuPy, got {value}"
            for p, value in bound.arguments.items() if isinstance(value, str) and not accepts(ctypes.get(p), value)]


@pytest.fixture(scope="module")
def recorded():
    calls = cupy_calls.load(CALL_LOG)
    if not calls:
        pytest.fail(f"no recorded CuPy calls in {CALL_LOG}: `make test-cuda` runs the fake harness with "
                    "MINIGRAD_CUPY_CALL_LOG set first (or `make test` does, for the whole suite)")
    return calls


def test_recorded_calls_bind_to_the_real_cupy(recorded, record_property):
    names = {c["name"] for c in recorded}
    assert {"cupy.ElementwiseKernel.__call__", "cupy.empty_like", "cupy.cuda.nccl.NcclCommunicator.allReduce",
            "cupy.cuda.Memory", "cupy.cuda.runtime.getDeviceCount"} <= names   # every fake was exercised
    problems = sorted({p for c in recorded for p in check_call(c)})
    assert not problems, "calls into the fake CuPy that the real one refuses:\n" + "\n".join(problems)
    record_property("cupy_calls", len(recorded))


def test_the_check_finds_a_drifted_fake():
    """What the checks above catch: a tuple where CuPy 14 takes ``bytes commId``, a missing argument, a
    keyword CuPy lacks, a name CuPy doesn't have."""
    bad = [{"name": "cupy.cuda.nccl.NcclCommunicator", "args": ["int", "tuple", "int"], "kwargs": {}},
           {"name": "cupy.cuda.nccl.NcclCommunicator.allReduce", "args": ["int"] * 5, "kwargs": {}},
           {"name": "cupy.cuda.Stream", "args": [], "kwargs": {"nonblocking": "bool"}},
           {"name": "cupy.cuda.nccl.allReduceAsync", "args": [], "kwargs": {}},
           {"name": "cupy.divide", "args": ["ndarray:float32", "int"], "kwargs": {"where": "bool"}}]
    problems = [check_call(c) for c in bad]
    assert "parameter commId is bytes in CuPy, got tuple" in problems[0][0]
    assert "missing a required argument: 'stream'" in problems[1][0]
    assert "unexpected keyword argument 'nonblocking'" in problems[2][0]
    assert "real CuPy has no cupy.cuda.nccl.allReduceAsync" in problems[3][0]
    assert "unexpected keyword argument 'where'" in problems[4][0]
    good = {"name": "cupy.cuda.nccl.NcclCommunicator", "args": ["int", "bytes", "int"], "kwargs": {}}
    assert check_call(good) == []


# --- minigrad's source ----------------------------------------------------------------------------
def _chain(node):
    """['self', 'cupy', 'cuda', 'Event'] for self.cupy.cuda.Event; None if not a plain attribute chain."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id] + parts[::-1]


def _numpy_only(test):
    """``xp.__name__ == "numpy"`` / ``xp is np``: the branch runs on NumPy alone."""
    if not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return False
    left, op, right = test.left, test.ops[0], test.comparators[0]
    if isinstance(op, ast.Eq) and isinstance(left, ast.Attribute) and left.attr == "__name__":
        return (_chain(left.value) or [""])[-1] == "xp" and getattr(right, "value", None) == "numpy"
    return isinstance(op, ast.Is) and (_chain(left) or [""])[-1] == "xp" and getattr(right, "id", None) == "np"


def cupy_uses(root=ROOT / "minigrad"):
    """[(CuPy path, keyword names or None when not called, 'file:line')] for every CuPy name minigrad's
    source reaches: through ``import cupy``/``from cupy... import``, attributes bound to those, and ``xp``."""
    uses = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text()
        if "cupy" not in text and "xp" not in text:
            continue
        tree = ast.parse(text)
        nodes = list(ast.walk(tree))
        aliases = {}
        for node in nodes:
            if isinstance(node, ast.Import):
                aliases.update({(a.asname or a.name.split(".")[0],): (a.name if a.asname else a.name.split(".")[0])
                                for a in node.names if a.name.split(".")[0] in ("cupy", "cupyx")})
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("cupy", "cupyx"):
                aliases.update({(a.asname or a.name,): f"{node.module}.{a.name}" for a in node.names})
                uses += [(f"{node.module}.{a.name}", None, f"{path.relative_to(root.parent)}:{node.lineno}")
                         for a in node.names]
        assigns = [n for n in nodes if isinstance(n, ast.Assign)] if aliases else []
        for _ in range(2):   # x = cupy.cuda; self.nccl, y = nccl, y
            for node in assigns:
                targets = node.targets[0].elts if isinstance(node.targets[0], ast.Tuple) else node.targets
                values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
                for t, v in zip(targets, values):
                    chain_t, chain_v = _chain(t) if not isinstance(t, ast.Name) else [t.id], _chain(v)
                    for n in (1, 2):
                        if chain_t and chain_v and tuple(chain_v[:n]) in aliases:
                            aliases[tuple(chain_t)] = ".".join([aliases[tuple(chain_v[:n])]] + chain_v[n:])
                            break
        uses += _walk(nodes, aliases, f"{path.relative_to(root.parent)}")
    return uses


def _walk(nodes, aliases, where):
    uses, called, skip = [], {}, set()
    for node in nodes:
        if isinstance(node, ast.If) and _numpy_only(node.test):
            skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
        if isinstance(node, ast.Call):
            called[id(node.func)] = [k.arg for k in node.keywords if k.arg]
        if isinstance(node, ast.Attribute):
            for child in ast.iter_child_nodes(node):
                skip.add(id(child))   # only the longest chain
    for node in nodes:
        if not isinstance(node, ast.Attribute) or id(node) in skip:
            continue
        chain = _chain(node)
        if not chain:
            continue
        path = None
        for n in (2, 1):
            if tuple(chain[:n]) in aliases and len(chain) > n:
                path = ".".join([aliases[tuple(chain[:n])]] + chain[n:])
                break
        if path is None and "xp" in chain[:-1]:
            path = ".".join(["cupy"] + chain[chain.index("xp") + 1:])
        if path and not path.endswith(".__name__"):
            uses.append((path, called.get(id(node)), f"{where}:{node.lineno}"))
    return uses


def source_problems(uses):
    """Problems (strings) with CuPy names and keywords found in the source."""
    problems = []
    for path, keywords, where in uses:
        try:
            obj = resolve(path)
        except LookupError as e:
            problems.append(f"{where}: {e}")
            continue
        found = signature(obj, path.rsplit(".", 1)[-1]) if keywords else None
        if keywords and found is None:
            problems.append(f"{where}: {path} is called with keywords but CuPy's signature is unreadable")
        elif keywords and not any(p.kind is p.VAR_KEYWORD for p in found[0].parameters.values()):
            problems += [f"{where}: {path}(... {k}=): CuPy's {path}{found[0]} has no {k}"
                         for k in keywords if k not in found[0].parameters]
    return problems


def test_every_cupy_name_in_minigrads_source_exists(recorded, record_property):
    uses = cupy_uses()
    paths = {p for p, _, _ in uses}
    assert {"cupy.ElementwiseKernel", "cupy.cuda.nccl.NcclCommunicator", "cupy.cuda.Memory"} <= paths
    problems = source_problems(uses)
    assert not problems, "\n".join(problems)
    record_property("cupy_names", len(paths | {c["name"] for c in recorded}))


def test_a_missing_name_or_keyword_in_the_source_is_found(tmp_path):
    (tmp_path / "m.py").write_text("import cupy\nfrom cupy.cuda import nccl\n"
                                   "def f(xp, a):\n    xp.stack(a, axis=0, where=1)\n    nccl.NCCL_FLOAT8\n"
                                   "    if xp.__name__ == 'numpy':\n        xp.frobnicate(a)\n"
                                   "    return cupy.cuda.Stream(non_blocking=True)\n")
    uses = cupy_uses(tmp_path)
    assert {(p, tuple(k or ())) for p, k, _ in uses} == {
        ("cupy.stack", ("axis", "where")), ("cupy.cuda.nccl.NCCL_FLOAT8", ()),
        ("cupy.cuda.Stream", ("non_blocking",)), ("cupy.cuda.nccl", ())}
    problems = "\n".join(source_problems(uses))
    assert problems.count("\n") == 1 and "has no where" in problems and "no cupy.cuda.nccl.NCCL_FLOAT8" in problems


# --- the fakes and the catalogue ------------------------------------------------------------------
def _load(relpath, name):
    spec = importlib.util.spec_from_file_location(name, ROOT / relpath)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_fake_nccl_constants_are_nccls():
    from cupy.cuda import nccl
    fake = _load("tests/distributed/fake_nccl.py", "fake_nccl_under_test")
    names = [n for n in vars(fake) if n.startswith("NCCL_")]
    assert len(names) >= 13
    assert {n: getattr(fake, n) for n in names} == {n: getattr(nccl, n) for n in names}
    from minigrad.distributed import backend_nccl
    for table in (backend_nccl._NCCL_TYPES, backend_nccl._NCCL_OPS):
        assert all(hasattr(nccl, v) for v in table.values())


def _kernel_binding(spec, args):
    """(placeholder binding, names given numbers) of one recorded call; None if CuPy would refuse it."""
    params = spec.kernel.in_params + spec.kernel.out_params
    binding, scalars = {}, set()
    for p, described in zip(params, args):
        if not described.startswith("ndarray:"):
            scalars.add(p.name)
            continue
        dt = described.split(":", 1)[1]
        if p.dtype is not None and np.dtype(dt) != p.dtype:
            return None   # CuPy raises 'Type is mismatched' (a test checks that refusal)
        if p.dtype is None and binding.setdefault(p.ctype, dt) != dt:
            return None
    return binding, scalars


def test_every_recorded_kernel_call_is_a_declared_binding(recorded):
    from minigrad.backend.cuda_kernels import KERNELS
    seen, problems = set(), []
    for call in recorded:
        spec = KERNELS.get(call.get("self"))
        if call["name"] != "cupy.ElementwiseKernel.__call__" or spec is None:
            continue
        seen.add(call["self"])
        found = _kernel_binding(spec, call["args"])
        if found is None:
            continue
        binding, scalars = found
        if not any(binding.items() <= declared.items() for declared in spec.types):
            problems.append(f"{call['self']} called with {binding}, declared types {list(spec.types)}")
        if scalars != spec.scalars:
            problems.append(f"{call['self']}: numbers given for {sorted(scalars)}, declared {sorted(spec.scalars)}")
    assert not problems, "\n".join(problems)
    assert len(seen) >= 10, seen   # the harness drives (almost) every catalogued kernel
