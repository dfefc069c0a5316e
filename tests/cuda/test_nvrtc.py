"""NVRTC, the real CUDA compiler, compiles every CUDA source minigrad can generate, as CuPy would hand it over,
for sm_80 and sm_90 (tools/nvrtc_check.py says how the sources are made). A rejected kernel fails with
NVRTC's log and its source. Runs in .venv-cuda (make test-cuda); skips elsewhere."""
import numpy as np
import pytest

from tools import nvrtc_check

pytestmark = pytest.mark.usefixtures("toolchain")


@pytest.fixture(scope="module")
def sources():
    return nvrtc_check.all_sources()


def test_every_kernel_minigrad_generates_compiles(sources, record_property):
    kernels, not_emitted = sources
    catalogue = [s for s in kernels if s.label.startswith("cuda_kernels.")]
    from minigrad.backend.cuda_kernels import KERNELS
    assert {s.name for s in catalogue} == set(KERNELS)   # every catalogued kernel has its sources
    rejected = nvrtc_check.compile_all(kernels, nvrtc_check.ARCHS)   # sm_80 and sm_90, on 2 threads
    assert not rejected, f"NVRTC rejects {len(rejected)} kernel(s):\n{nvrtc_check.report(rejected)}"
    record_property("nvrtc_sources", len(kernels))
    record_property("nvrtc_programs", len(kernels) * len(nvrtc_check.ARCHS))
    record_property("nvrtc_not_emitted", len(not_emitted))


def test_fusion_cases_cover_every_fusible_op():
    """Each op of the fusion table is in some chain the check compiles, in float32 and float64 (float16
    chains emit no kernel today; the day they do, the check compiles them too)."""
    from minigrad.compiler.fusion import RULES
    table = {getattr(op, "name", None) or op.__name__ for op in RULES}
    compiled = {}
    for case, dt, kernel in nvrtc_check.fusion_kernels():
        ops = {s.op_name for s in kernel.steps}
        compiled.setdefault(dt, set()).update(ops if kernel.cupy_supported() else ())
    for dt in ("float32", "float64"):
        assert table <= compiled[dt], f"fusible ops without a case in tools/nvrtc_check.py: {table - compiled[dt]}"


# --- the sources are CuPy's -------------------------------------------------------------------------
def test_elementwise_source_is_what_cupy_generates(toolchain):
    k = toolchain.ElementwiseKernel("T x, raw int64 idx, int32 n", "T y", "y = x * n + idx[0]", "mg_probe")
    src = nvrtc_check.elementwise_source(k, {"T": "float32"}, {"n"}, "contiguous", "probe")
    assert src.code.startswith("#include <cupy/complex.cuh>\n#include <cupy/carray.cuh>\n")
    for piece in ("typedef float T;", 'extern "C" __global__ void mg_probe(',
                  "const CArray<float, 1, 1, 1> _raw_x", "const CArray<long long, 1, 1, 1> idx", "const int n",
                  "CArray<float, 1, 1, 1> _raw_y", "CIndexer<1, 1> _ind", "const T &x = _raw_x[_ind.get()];",
                  "y = x * n + idx[0];"):
        assert piece in src.code, piece
    strided = nvrtc_check.elementwise_source(k, {"T": "float64"}, {"n"}, "strided", "probe").code
    assert "typedef double T;" in strided and "CArray<double, 2, 0, 0> _raw_x" in strided
    assert "CIndexer<2, 0> _ind" in strided
    options = nvrtc_check.nvrtc_options((), "90")
    assert options[-3:] == ("-ftz=true", "-arch=sm_90", "--device-as-default-execution-space")
    assert "--std=c++17" in options and any(o.endswith("cuda_runtime/include") for o in options)
    # the wheels' NVRTC and CUDA headers, never a local toolkit (CI has none; this machine's /usr/local/cuda is 13)
    import sys
    from cupy_backends.cuda.libs import nvrtc
    assert nvrtc.getVersion()[0] == 12
    headers = [o[2:] for o in options if o.startswith("-I") and "cuda_runtime" in o]
    assert headers and all(h.startswith(sys.prefix) for h in headers)


def test_fused_kernel_source_is_the_generators():
    case, dt, kernel = next(c for c in nvrtc_check.fusion_kernels(("float32",)) if c[0] == "gelu")
    ins, outs, body = kernel.cupy_forward_source()
    import cupy
    src = nvrtc_check.elementwise_source(kernel.cupy_kernel(cupy), {}, frozenset(), "contiguous", "gelu").code
    assert body.splitlines()[0] in src and "const float &x0 = _raw_x0[_ind.get()];" in src
    assert "#define sigmoid(x)" in src   # the generator's preamble comes before the kernel


# --- the check can fail -----------------------------------------------------------------------------
def _spec(kernel, types, scalars=()):
    from minigrad.backend.cuda_kernels import KernelSpec
    return KernelSpec("elementwise", kernel, (), tuple(types), frozenset(scalars), {})


def test_a_kernel_with_a_cuda_error_fails_the_check_with_its_log(toolchain):
    """A bad kernel among good ones (one NVRTC program for the batch): the check names the bad one only,
    with NVRTC's error and the kernel's source."""
    ek = toolchain.ElementwiseKernel
    kernels = {
        "mg_good": _spec(ek("T x", "T y", "y = exp(x)", "mg_good"), [{"T": "float32"}]),
        "mg_half": _spec(ek("T x, T a", "T y", "y = a * x", "mg_half"), [{"T": "float16"}], ["a"]),
        "mg_bad": _spec(ek("T x", "T y", "y = exp(x, 2)", "mg_bad"), [{"T": "float32"}]),
        "mg_undeclared": _spec(ek("T x", "T y", "y = undeclared_fn(x)", "mg_undeclared"), [{"T": "float64"}]),
    }
    sources = nvrtc_check.catalogue_sources(kernels, layouts=("contiguous",))
    assert len(nvrtc_check.batches(sources)) < len(sources)          # compiled in shared programs
    rejected = nvrtc_check.compile_all(sources, "90")
    assert sorted(r.source.name for r in rejected) == ["mg_bad", "mg_undeclared"]
    text = nvrtc_check.report(rejected)
    assert "cuda_kernels.mg_bad[T=float32, contiguous]: NVRTC rejects it for sm_90" in text
    assert 'no instance of overloaded function "exp"' in text and 'identifier "undeclared_fn" is undefined' in text
    assert "y = exp(x, 2);" in text


def test_a_raw_kernel_is_compiled_as_written(toolchain):
    good = 'extern "C" __global__ void mg_raw(float* x) { x[threadIdx.x] *= 2.0f; }'
    bad = 'extern "C" __global__ void mg_raw_bad(float* x) { x[threadIdx.x] = __shfl_sync(x); }'
    from minigrad.backend.cuda_kernels import KernelSpec
    kernels = {n: KernelSpec("raw", toolchain.RawKernel(code, n), (code,), (), frozenset(), {})
               for n, code in (("mg_raw", good), ("mg_raw_bad", bad))}
    sources = nvrtc_check.catalogue_sources(kernels)
    assert [s.code for s in sources] == [good, bad]                  # no CuPy headers for a RawKernel
    rejected = nvrtc_check.compile_all(sources, "80")
    assert [r.source.name for r in rejected] == ["mg_raw_bad"] and "__shfl_sync" in rejected[0].log


def test_a_catalogue_entry_must_declare_its_types(toolchain):
    k = toolchain.ElementwiseKernel("T x, S s", "T y", "y = x * s", "mg_types")
    with pytest.raises(ValueError, match=r"must bind exactly \['S', 'T'\]"):
        nvrtc_check.catalogue_sources({"mg_types": _spec(k, [{"T": "float32"}])})
    with pytest.raises(ValueError, match="scalars .*'z'.* are not input parameters"):
        nvrtc_check.catalogue_sources({"mg_types": _spec(k, [{"T": "float32", "S": "int32"}], ["z"])})


# --- make gpu-check's comparison of what CuPy compiled ------------------------------------------------
def test_gpu_check_compares_cupys_compiled_sources_with_the_checks(toolchain, capsys):
    """On a GPU, benchmarks/gpu_kernel_check.py reads the sources CuPy compiled for each catalogued kernel
    (``_cached_codes``) and compares them with tools/nvrtc_check.py's. Here kernels stand in whose caches hold
    what CuPy generates (a strided float64 launch), an undeclared binding, and an edited source."""
    import pathlib
    import sys
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks"))
    try:
        import gpu_kernel_check
    finally:
        sys.path.pop(0)
    from cupy._core import core
    from minigrad.backend.cuda_kernels import KernelSpec

    class Launched:   # a kernel after launches: CuPy's cache of generated sources, keyed by array dtypes
        def __init__(self, kernel, codes):
            self._kernel, self._cached_codes = kernel, codes

        def __getattr__(self, name):
            return getattr(self._kernel, name)

    k = toolchain.ElementwiseKernel("T x, T a", "T y", "y = a * x", "mg_cached")
    header = "".join(f"#include <{h}>\n" for h in core._cupy_header_list)
    cupys = nvrtc_check.elementwise_source(k, {"T": "float64"}, {"a"}, "strided", "").code[len(header):]
    f64, f32 = np.dtype("float64"), np.dtype("float32")
    cases = {"declared": Launched(k, {(f64, f64): cupys}), "undeclared": Launched(k, {(f32, f32): cupys}),
             "edited": Launched(k, {(f64, f64): cupys.replace("a * x", "a + x")})}
    failures = []
    for name, kernel in cases.items():
        spec = KernelSpec("elementwise", kernel, (), ({"T": "float64"},), frozenset({"a"}), {})
        gpu_kernel_check.check_compiled_bindings(failures, {name: spec})
    out = capsys.readouterr().out
    assert failures == ["undeclared undeclared binding", "edited source"], out
    assert "ok    declared {'T': 'float64'}: compiled by CuPy, source as the NVRTC check's" in out
    assert "note  undeclared {'T': 'float64'}: declared, not launched" in out
