"""Every CUDA source minigrad can generate, exactly as CuPy hands it to NVRTC, and NVRTC to compile it.

No GPU and no driver are needed: NVRTC (the ``nvidia-cuda-nvrtc-cu12`` wheel) compiles on any machine, and
CuPy (``cupy-cuda12x``) imports and generates its kernel code without a device. ``make test-cuda`` builds
``.venv-cuda`` with both and runs tests/cuda/, which compiles everything below for sm_80 and sm_90.

Where the sources come from (``all_sources``):

* the kernel catalogue, ``minigrad.backend.cuda_kernels.KERNELS`` (every kernel minigrad writes by hand is
  built through its ``elementwise``/``raw`` factories): each ElementwiseKernel once per declared type binding
  and array layout, each RawKernel's code as it is;
* the fusion pass: one small chain per op of its table (``FUSION_CASES``, checked against the table) in
  float32, float16 and float64, traced by ``mg.compile`` on the CPU; each FusedKernel's forward kernel and
  its backward kernel for every set of wanted gradients, whenever the kernel says CuPy runs it
  (``cupy_supported()``; float16 chains don't, today: they run as CuPy array expressions).

How CuPy builds an ElementwiseKernel's source (cupy/_core/_kernel.pyx, core.pyx, cuda/compiler.py, v14):
``__call__`` decides the placeholder types from the arrays (``_decide_params_type``), describes each
argument (``_ArgInfo``: array with its ndim/contiguity/32-bit indexing, or scalar), and
``_get_elementwise_kernel_code`` writes the typedefs, the preamble and the ``extern "C" __global__`` loop;
``compile_with_cache`` puts ``#include <cupy/complex.cuh>`` etc. (``core._cupy_header_list``) first and
assembles the options (``assemble_cupy_compiler_options``: CCCL and CuPy include paths, the CUDA headers
of the ``nvidia-cuda-runtime-cu12`` wheel, ``--std=c++17``); ``_compile_with_cache_cuda`` adds
``-ftz=true``, ``_compile_using_nvrtc`` ``-arch=sm_XX`` and ``--device-as-default-execution-space``. Here
CuPy's own functions do all of it; only two things are written out, because CuPy reads them from a live
device: the arrays' layouts (``LAYOUTS``) and the three options of the last two steps (``nvrtc_options``).
A RawKernel's source is its code as given (no CuPy headers), with the same options.
"""
import argparse
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np

ARCHS = ("80", "90")   # A100, H100/H200
FLOAT_DTYPES = ("float32", "float16", "float64")
# (ndim, c_contiguous, index_32_bits) of the non-raw arrays after CuPy's reduce_dims: small contiguous
# arrays, and broadcast/strided ones past 2**31 elements (the other CArray/CIndexer instantiation)
LAYOUTS = {"contiguous": (1, True, True), "strided": (2, False, False)}
_NDARRAY, _INDEXER, _SCALAR = 1, 2, 3   # _ArgKind in cupy/_core/_kernel.pxd


class Source(NamedTuple):
    name: str       # the kernel function's name
    label: str      # where it comes from, for messages
    code: str       # the whole program NVRTC gets
    options: tuple  # the kernel's own NVRTC options (before CuPy's additions)


class Rejected(NamedTuple):
    source: Source
    arch: str
    log: str


# --- CuPy's code generation -------------------------------------------------------------------------
def elementwise_source(kernel, binding, scalars, layout, label):
    """The program CuPy compiles when ``kernel`` (a cupy.ElementwiseKernel) is called with arrays whose
    placeholder types are ``binding`` ({'T': 'float32'}), numbers for the parameters in ``scalars``, and
    non-raw arrays in ``layout``. Made by CuPy's own functions, as ElementwiseKernel.__call__ does."""
    import cupy
    from cupy._core import _carray, _kernel, _scalar, core
    ndim, contiguous, index_32 = LAYOUTS[layout]

    def dtype(p):
        return p.dtype if p.dtype is not None else np.dtype(binding[p.ctype])

    in_types, out_types, type_map = kernel._decide_params_type(
        tuple(None if p.name in scalars else dtype(p) for p in kernel.in_params),
        tuple(dtype(p) for p in kernel.out_params))
    infos = []
    for p, t in zip(kernel.in_params + kernel.out_params, in_types + out_types):
        if p.name in scalars:
            infos.append(_kernel._ArgInfo(_SCALAR, _scalar.CScalar, np.dtype(t), 0, True, True))
        elif p.raw:   # raw arrays are passed whole (1-D here), never reshaped
            infos.append(_kernel._ArgInfo(_NDARRAY, cupy.ndarray, np.dtype(t), 1, True, index_32))
        else:
            infos.append(_kernel._ArgInfo(_NDARRAY, cupy.ndarray, np.dtype(t), ndim, contiguous, index_32))
    infos.append(_kernel._ArgInfo(_INDEXER, _carray.Indexer, None, ndim, True, index_32))
    code = _kernel._get_elementwise_kernel_code(tuple(infos), type_map, kernel.params, kernel.operation,
                                                kernel.name, kernel.preamble, **kernel.kwargs)
    header = "".join(f"#include <{h}>\n" for h in core._cupy_header_list)   # core._cupy_header
    return Source(kernel.name, label, header + code, tuple(kernel.kwargs.get("options", ())))


def nvrtc_options(options, arch):
    """The options CuPy passes to nvrtcCompileProgram for a kernel with ``options`` on sm_<arch>."""
    from cupy._core import core
    return core.assemble_cupy_compiler_options(tuple(options)) + (
        "-ftz=true", f"-arch=sm_{arch}", "--device-as-default-execution-space")


# --- what minigrad generates ------------------------------------------------------------------------
def catalogue_sources(kernels=None, layouts=tuple(LAYOUTS)):
    """The sources of the kernel catalogue (default: minigrad.backend.cuda_kernels.KERNELS)."""
    if kernels is None:
        from minigrad.backend.cuda_kernels import KERNELS as kernels
    out = []
    for name, spec in kernels.items():
        if spec.kind == "raw":
            unsupported = set(spec.options) - {"options"}
            if unsupported:
                raise ValueError(f"{name}: the NVRTC check does not know RawKernel's {sorted(unsupported)} "
                                 "(teach tools/nvrtc_check.py what CuPy does with them)")
            out.append(Source(name, f"cuda_kernels.{name} (RawKernel)", spec.args[0],
                              tuple(spec.options.get("options", ()))))
            continue
        _check_spec(name, spec)
        for binding in spec.types:
            for layout in layouts:
                types = ", ".join(f"{k}={v}" for k, v in sorted(binding.items()))
                out.append(elementwise_source(spec.kernel, binding, spec.scalars, layout,
                                              f"cuda_kernels.{name}[{types}, {layout}]"))
    return out


def _check_spec(name, spec):
    params = spec.kernel.in_params + spec.kernel.out_params
    placeholders = {p.ctype for p in params if p.dtype is None}
    if not spec.types:
        raise ValueError(f"{name}: declare the types it is called with (types=FLOATS, ...)")
    for binding in spec.types:
        if set(binding) != placeholders:
            raise ValueError(f"{name}: types {binding} must bind exactly {sorted(placeholders)}")
    unknown = spec.scalars - {p.name for p in spec.kernel.in_params}
    if unknown:
        raise ValueError(f"{name}: scalars {sorted(unknown)} are not input parameters")


def _fusion_cases():
    import minigrad as mg
    import minigrad.nn.functional as F
    return {   # op of the fusion table -> a chain using it (a negation follows: a chain has >= 2 ops)
        "add": lambda x, y, c: -(x + y), "sub": lambda x, y, c: -(x - y), "mul": lambda x, y, c: -(x * y),
        "div": lambda x, y, c: -(x / y), "neg": lambda x, y, c: -(-x), "pow": lambda x, y, c: -(x ** y),
        "exp": lambda x, y, c: -x.exp(), "log": lambda x, y, c: -x.log(), "sqrt": lambda x, y, c: -x.sqrt(),
        "abs": lambda x, y, c: -x.abs(), "sin": lambda x, y, c: -x.sin(), "cos": lambda x, y, c: -x.cos(),
        "maximum": lambda x, y, c: -mg.maximum(x, y), "minimum": lambda x, y, c: -mg.minimum(x, y),
        "where": lambda x, y, c: -mg.where(c, x, y), "clamp": lambda x, y, c: -x.clamp(-0.5, 0.5),
        "relu": lambda x, y, c: -F.relu(x), "leaky_relu": lambda x, y, c: -F.leaky_relu(x, 0.1),
        "sigmoid": lambda x, y, c: -F.sigmoid(x), "tanh": lambda x, y, c: -F.tanh(x),
        "silu": lambda x, y, c: -F.silu(x), "gelu": lambda x, y, c: -F.gelu(x, approximate="tanh"),
        # operand kinds the generator writes differently: literals, x**2 as x*x, one-sided clamp
        "pow x**2.0": lambda x, y, c: -(x ** 2.0), "pow x**3.0": lambda x, y, c: -(x ** 3.0),
        "pow 2.0**x": lambda x, y, c: -(2.0 ** x), "clamp min": lambda x, y, c: -x.clamp(min=0.0),
        "mul literal": lambda x, y, c: (x * 0.5) + 1.0,
    }


def fusion_kernels(dtypes=FLOAT_DTYPES):
    """[(case, dtype, FusedKernel)] for every case of ``_fusion_cases`` in every dtype, traced on the CPU."""
    import minigrad as mg
    from minigrad.compiler import fused_kernels
    out = []
    for case, fn in _fusion_cases().items():
        for dt in dtypes:
            x = mg.tensor(np.linspace(0.1, 0.9, 6, dtype=dt).reshape(2, 3))
            y = mg.tensor(np.linspace(0.2, 0.7, 3, dtype=dt))   # broadcast, as a bias is
            c = mg.tensor(np.array([True, False, True]))
            compiled = mg.compile(fn)
            compiled(x, y, c)
            kernels = [k for g in compiled.graphs() for k in fused_kernels(g)]
            if len(kernels) != 1:
                raise AssertionError(f"fusion case {case!r} ({dt}): expected one fused kernel, got {kernels}")
            out.append((case, dt, kernels[0]))
    return out


def fusion_sources(dtypes=FLOAT_DTYPES):
    """(sources, not_emitted): the CuPy kernels of ``fusion_kernels``, forward and each backward variant,
    and [(case, dtype)] of the chains that run without a generated kernel (``cupy_supported()`` False)."""
    import cupy
    sources, not_emitted = [], []
    for case, dt, kernel in fusion_kernels(dtypes):
        if not kernel.cupy_supported():
            not_emitted.append((case, dt))
            continue
        floats = [i for i, d in enumerate(kernel.input_dtypes) if d.kind == "f"]
        variants = [None, [i in floats for i in range(len(kernel.input_dtypes))]]
        if len(floats) > 1:
            variants += [[i == f for i in range(len(kernel.input_dtypes))] for f in floats]
        for wanted in variants:
            what = "forward" if wanted is None else "backward " + "".join("x" if w else "." for w in wanted)
            sources.append(elementwise_source(kernel.cupy_kernel(cupy, wanted), {}, frozenset(), "contiguous",
                                              f"fusion {case} {dt} {what}"))
    return sources, not_emitted


def all_sources():
    catalogue = catalogue_sources()
    fused, not_emitted = fusion_sources()
    return catalogue + fused, not_emitted


# --- NVRTC -----------------------------------------------------------------------------------------
def compile_one(code, options, arch, name="kernel"):
    """Compile ``code`` for sm_<arch> as CuPy does; returns NVRTC's log if it rejects the program, else None."""
    from cupy.cuda import compiler
    try:
        compiler._NVRTCProgram(code, f"{name}.cu", method="cubin").compile(nvrtc_options(options, arch))
    except compiler.CompileException as e:
        return e.get_message()
    return None


def _split(source):
    at = source.code.find('extern "C" __global__')
    return (source.code, "") if at < 0 else (source.code[:at], source.code[at:])


def batches(sources, size=16):
    """Sources CuPy generated that share everything before their kernel function (CuPy's headers, typedefs,
    preamble) and their options, in groups of up to ``size`` with distinct kernel names: one program per
    group is that shared text followed by each kernel function -- every kernel's exact source, with the
    other kernels' functions in between. Parsing CuPy's headers is most of NVRTC's time, so a batch costs
    about one kernel. Other sources (RawKernels) are compiled alone."""
    groups = {}
    for s in sources:
        prefix, body = _split(s)
        if not body or not s.code.startswith("#include <cupy/"):   # a RawKernel's code: compiled alone
            groups[("alone", id(s))] = [[s]]
            continue
        open_batches = groups.setdefault((prefix, s.options), [])
        for b in open_batches:
            if len(b) < size and all(o.name != s.name for o in b):
                b.append(s)
                break
        else:
            open_batches.append([s])
    return [b for bs in groups.values() for b in bs]


def compile_all(sources, archs, size=16, jobs=2):
    """[Rejected] for every source NVRTC refuses on any of ``archs`` ('80' or ('80', '90')). A batch that
    fails is compiled again kernel by kernel, each from its own exact source, so a log always belongs to one
    kernel. ``jobs`` threads compile at once (NVRTC runs without the GIL and compiles programs in parallel)."""
    def run(job):
        arch, batch = job
        program = _split(batch[0])[0] + "".join(_split(s)[1] for s in batch)
        if len(batch) > 1 and compile_one(program, batch[0].options, arch, batch[0].name) is None:
            return []
        return [Rejected(s, arch, log) for s in batch
                for log in [compile_one(s.code, s.options, arch, s.name)] if log is not None]

    work = [(arch, b) for arch in ([archs] if isinstance(archs, str) else archs) for b in batches(sources, size)]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return [r for found in pool.map(run, work) for r in found]


def report(rejected, limit=40):
    """Each rejected kernel: what it is, the arch, NVRTC's log and the kernel's own source lines."""
    parts = []
    for r in rejected:
        body = _split(r.source)[1] or r.source.code
        numbered = "\n".join(f"{i + 1:4d}  {line}" for i, line in enumerate(body.splitlines()[:limit]))
        parts.append(f"--- {r.source.label}: NVRTC rejects it for sm_{r.arch}\n{r.log.strip()}\n"
                     f"--- its kernel function:\n{numbered}")
    return "\n".join(parts)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default=",".join(ARCHS), help="comma-separated compute capabilities")
    ap.add_argument("--jobs", type=int, default=2, help="compiler threads")
    ap.add_argument("--list", action="store_true", help="print every source's label and stop")
    args = ap.parse_args(argv)
    sources, not_emitted = all_sources()
    if args.list:
        print("\n".join(s.label for s in sources))
        return 0
    start = time.perf_counter()
    rejected = compile_all(sources, args.arch.split(","), jobs=args.jobs)
    print(report(rejected))
    print(f"NVRTC: {len(sources)} kernel sources x {len(args.arch.split(','))} archs compiled in "
          f"{time.perf_counter() - start:.1f}s, {len(rejected)} rejected; {len(not_emitted)} fusion chains "
          f"run without a generated kernel ({', '.join(sorted({d for _, d in not_emitted}))})")
    return 1 if rejected else 0


if __name__ == "__main__":
    sys.exit(main())
