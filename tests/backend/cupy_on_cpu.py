"""A fake ``cupy`` for tests: CuPy's ElementwiseKernel semantics on CPU. It checks the kernel maths and the
Python wrappers' argument order, not CUDA itself.

Only what minigrad/backend/cuda_kernels.py uses is here: ``ElementwiseKernel`` and ``empty_like``, on NumPy
arrays, and ``RawKernel``, which keeps its code but cannot run here (its kernels are checked by NVRTC and
on a GPU). Calls are recorded (tests/cupy_calls.py) for the check against the real CuPy. A kernel's operation (its C++ body, the same text nvcc would compile) is put in a loop over the
elements, compiled with g++ and called through ctypes. It follows CuPy's rules:

* parameters are ``[raw] type name``; a type that is not a dtype name (``T``) is a placeholder, taken from
  the *arrays* passed for it (outputs first). They must agree ("Type is mismatched", a TypeError, as CuPy),
  and an array for a concrete type (``int64``) must have exactly that dtype. Scalars (Python or NumPy) never
  decide a type: they are cast to their parameter's type and passed by value;
* non-raw array arguments broadcast together; ``i`` is the element's index in that (C-order) shape; raw
  arguments are passed whole and the body indexes them with ``[]``;
* outputs are allocated (broadcast shape) unless passed after the inputs; passed ones are updated in place
  and the body can read their current value (CuPy makes outputs references, inputs const).
"""
import ctypes
import hashlib
import os
import pathlib
import subprocess
import sys
import tempfile

import numpy as np

sys.path.append(str(pathlib.Path(__file__).resolve().parents[1]))  # tests/: the call recorder
from cupy_calls import api  # noqa: E402

ndarray = np.ndarray
float16, float32, float64 = np.float16, np.float32, np.float64
empty_like = api("cupy.empty_like")(np.empty_like)

# where compiled kernels go: kept between runs (the file name is a hash of the source and flags, so a changed
# kernel is compiled again), so `make test-cuda`'s second run of the fake harness compiles nothing
cache_dir = str(pathlib.Path(__file__).resolve().parents[2] / "build" / "cupy_on_cpu")
CXX_FLAGS = ("-O1", "-shared", "-fPIC")
_C_TYPES = {"bool": ("bool", ctypes.c_bool), "int8": ("int8_t", ctypes.c_int8),
            "uint8": ("uint8_t", ctypes.c_uint8), "int16": ("int16_t", ctypes.c_int16),
            "uint16": ("uint16_t", ctypes.c_uint16), "int32": ("int32_t", ctypes.c_int32),
            "uint32": ("uint32_t", ctypes.c_uint32), "int64": ("int64_t", ctypes.c_int64),
            "uint64": ("uint64_t", ctypes.c_uint64), "float32": ("float", ctypes.c_float),
            "float64": ("double", ctypes.c_double)}
_LIBS = {}  # source hash -> the compiled function


class _Param:
    def __init__(self, text, is_input):
        *mods, self.type, self.name = text.split()
        if any(m != "raw" for m in mods) or not self.name.isidentifier() or self.name.startswith("_"):
            raise ValueError(f"bad kernel parameter {text!r}")
        self.raw, self.is_input = "raw" in mods, is_input
        self.dtype = np.dtype(self.type) if self.type in _C_TYPES else None  # None: a placeholder like T


def _params(spec, is_input):
    return [_Param(s, is_input) for s in spec.split(",") if s.strip()]


def _c_type(dtype):
    if dtype.name not in _C_TYPES:
        raise TypeError(f"cupy_on_cpu: no C type for {dtype} (supported: {', '.join(_C_TYPES)})")
    return _C_TYPES[dtype.name]


@api("cupy.ElementwiseKernel")
class ElementwiseKernel:
    def __init__(self, in_params, out_params, operation, name="kernel", reduce_dims=True, preamble="",
                 no_return=False, return_tuple=False, **kwargs):
        if set(kwargs) - {"options"} or no_return or return_tuple:
            raise NotImplementedError("cupy_on_cpu: ElementwiseKernel options other than preamble/options")
        self.ins, self.outs = _params(in_params, True), _params(out_params, False)
        self.operation, self.name, self.preamble = operation, name, preamble

    def __call__(self, *args):
        nin, params = len(self.ins), self.ins + self.outs
        if len(args) not in (nin, len(params)):
            raise TypeError(f"Wrong number of arguments for {self.name}")
        ins, outs = list(args[:nin]), list(args[nin:])
        if not all(isinstance(a, np.ndarray) for a in outs):
            raise TypeError("Output arguments must be cupy.ndarray")
        types = {}  # placeholder -> dtype, from the arrays (outputs first, as CuPy)
        for p, a in list(zip(self.outs, outs)) + list(zip(self.ins, ins)):
            if isinstance(a, np.ndarray):
                want = p.dtype or types.setdefault(p.type, a.dtype)
                if a.dtype != want:
                    raise TypeError(f"Type is mismatched. {p.name} {a.dtype} {want} {p.type}")
        missing = {p.type for p in params if p.dtype is None} - set(types)
        if missing:
            raise TypeError(f"{self.name}: cannot decide the type of {sorted(missing)} (no array for it)")
        dtypes = [p.dtype or types[p.type] for p in params]
        shaped = [a.shape for p, a in zip(params, args) if isinstance(a, np.ndarray) and not p.raw]
        if not shaped:
            raise ValueError(f"{self.name}: no non-raw array argument gives the loop size")
        shape = np.broadcast_shapes(*shaped)
        if any(o.shape != shape for p, o in zip(self.outs, outs) if not p.raw):
            raise ValueError(f"{self.name}: Out shape is mismatched ({[o.shape for o in outs]} vs {shape})")
        if not outs:
            outs = [np.empty(shape, dt) for dt in dtypes[nin:]]
        c_args, kinds, keep, copy_back = [], [], [], []
        for p, a, dt in zip(params, ins + outs, dtypes):
            if not isinstance(a, np.ndarray):                      # scalar: cast, by value
                kinds.append("scalar")
                c_args.append(_c_type(dt)[1](dt.type(a)))
                continue
            kinds.append("raw" if p.raw else "array")
            if p.is_input:
                buf = np.ascontiguousarray(a if p.raw else np.broadcast_to(a, shape))
            else:
                buf = a if a.flags.c_contiguous and a.flags.aligned else np.ascontiguousarray(a)
                if buf is not a:
                    copy_back.append((a, buf))
            keep.append(buf)  # alive until the call returns
            c_args.append(ctypes.c_void_p(buf.ctypes.data))
        self._compile(kinds, dtypes)(int(np.prod(shape)), *c_args)
        for a, buf in copy_back:
            a[...] = buf
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _compile(self, kinds, dtypes):
        typedefs = {p.type: _c_type(dt)[0] for p, dt in zip(self.ins + self.outs, dtypes) if p.dtype is None}
        sig, loads, stores, argtypes = ["long long _n"], [], [], [ctypes.c_longlong]
        for p, kind, dt in zip(self.ins + self.outs, kinds, dtypes):
            c, ct = _c_type(dt)
            c = c if p.dtype is not None else p.type  # declared as T, as CuPy does
            const = "const " if p.is_input else ""
            if kind == "scalar":
                sig.append(f"{const}{c} {p.name}")
                argtypes.append(ct)
                continue
            argtypes.append(ctypes.c_void_p)
            if kind == "raw":
                sig.append(f"{const}{c}* {p.name}")
                continue
            sig.append(f"{const}{c}* _raw_{p.name}")
            loads.append(f"{const}{c} {p.name} = _raw_{p.name}[i];")
            if not p.is_input:
                stores.append(f"_raw_{p.name}[i] = {p.name};")
        src = "\n".join(["#include <cmath>", "#include <cstddef>", "#include <cstdint>", "using namespace std;"]
                        + [f"typedef {c} {t};" for t, c in sorted(typedefs.items())] + [self.preamble]
                        + [f'extern "C" void kern({", ".join(sig)}) {{',
                           "  for (ptrdiff_t i = 0; i < _n; ++i) {",
                           "    " + " ".join(loads), self.operation + ";",  # CuPy adds the ';' too
                           "    " + " ".join(stores), "  }", "}", ""])
        key = hashlib.sha256((src + repr(CXX_FLAGS)).encode()).hexdigest()[:24]
        fn = _LIBS.get(key)
        if fn is None:
            fn = _LIBS[key] = _build(key, src, self.name)
            fn.argtypes, fn.restype = argtypes, None
        return fn


@api("cupy.RawKernel")
class RawKernel:
    def __init__(self, code, name, options=(), backend="nvrtc", translate_cucomplex=False,
                 enable_cooperative_groups=False, jitify=False):
        self.code, self.name, self.options = code, name, options

    def __call__(self, grid, block, args, **kwargs):
        raise NotImplementedError(f"cupy_on_cpu cannot run RawKernel {self.name}: its source is compiled by "
                                  "make test-cuda (NVRTC) and run by make gpu-check")


def _build(key, src, name):
    global cache_dir
    if cache_dir is None:
        cache_dir = tempfile.mkdtemp(prefix="cupy_on_cpu-")
    os.makedirs(cache_dir, exist_ok=True)
    so = os.path.join(cache_dir, f"{key}.so")
    if not os.path.exists(so):  # write under a private name, then rename: safe with parallel workers
        tmp = os.path.join(cache_dir, f"{key}.{os.getpid()}")
        with open(tmp + ".cpp", "w") as f:
            f.write(src)
        r = subprocess.run(["g++", *CXX_FLAGS, tmp + ".cpp", "-o", tmp + ".so"], capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(f"kernel {name}: g++ failed\n{r.stderr}\n--- source ---\n{src}")
        os.replace(tmp + ".so", so)
    return ctypes.CDLL(so).kern
