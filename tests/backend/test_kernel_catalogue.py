"""Every CUDA kernel minigrad builds goes through the factories of minigrad/backend/cuda_kernels.py, so the
NVRTC check (make test-cuda, tools/nvrtc_check.py) compiles it. The fusion pass's code generator is the one
other source of kernels, and the check enumerates it itself (every fusible op x dtype)."""
import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
CONSTRUCTORS = {"ElementwiseKernel", "RawKernel", "ReductionKernel", "RawModule"}
ALLOWED = {"minigrad/backend/cuda_kernels.py": {"elementwise", "raw"},     # the factories, nowhere else there
           "minigrad/compiler/fusion/kernel.py": None}                      # the generator (enumerated by the check)


def kernel_constructions(root):
    """[(file, line, outermost enclosing function or '', what)] for each CuPy kernel built under ``root``."""
    found = []

    def visit(node, func, rel):
        what = _kernel_use(node)
        if what:
            found.append((rel, node.lineno, func, what))
        inner = node.name if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not func else func
        for child in ast.iter_child_nodes(node):
            visit(child, inner, rel)

    for path in sorted(root.rglob("*.py")):
        visit(ast.parse(path.read_text()), "", path.relative_to(root.parent).as_posix())
    return sorted(found)


def _kernel_use(node):
    if isinstance(node, ast.Attribute) and node.attr in CONSTRUCTORS:
        return node.attr
    if isinstance(node, ast.Attribute) and node.attr == "fuse" and isinstance(node.value, ast.Name) \
            and node.value.id in ("cupy", "cp", "xp"):
        return "cupy.fuse"
    if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cupy"):
        names = CONSTRUCTORS & {a.name for a in node.names} | ({"fuse"} & {a.name for a in node.names})
        return ", ".join(sorted(names)) or None
    return None


def offenders(found):
    bad = []
    for rel, line, func, what in found:
        allowed = ALLOWED.get(rel, set())
        if allowed is None or func in allowed:
            continue
        bad.append(f"{rel}:{line} builds a CuPy {what} outside the kernel catalogue")
    return bad


def test_cuda_kernels_are_built_only_through_the_catalogue():
    found = kernel_constructions(ROOT / "minigrad")
    assert any(rel.endswith("cuda_kernels.py") for rel, *_ in found)   # the scan sees the factories
    bad = offenders(found)
    assert not bad, ("\n".join(bad) + "\nbuild it with minigrad.backend.cuda_kernels.elementwise(...) or raw(...) "
                     "(see that module's docstring) so make test-cuda compiles it with NVRTC")


def test_a_kernel_built_elsewhere_is_found(tmp_path):
    pkg = tmp_path / "minigrad" / "inference"
    pkg.mkdir(parents=True)
    (pkg / "paged.py").write_text("import cupy\nfrom cupy import RawKernel\n"
                                  "_k = cupy.ElementwiseKernel('T x', 'T y', 'y = x', 'k')\n"
                                  "def f(xp):\n    return xp.fuse(lambda a: a)\n")
    bad = offenders(kernel_constructions(tmp_path / "minigrad"))
    assert [b.split(" builds")[0] for b in bad] == ["minigrad/inference/paged.py:2", "minigrad/inference/paged.py:3",
                                                    "minigrad/inference/paged.py:5"]
