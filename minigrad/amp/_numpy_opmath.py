"""Float16 storage, float32 arithmetic, for autocast on NumPy devices (cpu and the cuda emulator).

NumPy has no float16 arithmetic: every float16 ufunc loop converts each element to float32 and back in
software, 10-20x slower than the float32 loop (and float16 GEMMs have no BLAS at all). GPUs do the same
conversion in registers for free: PyTorch's CUDA kernels compute float16 ops in float32 ("opmath") and
round the result. Under autocast on a NumPy device an op that receives float16 tensors therefore runs on
float32 copies of them, and what it keeps is rounded back to float16:

    inputs    float16 tensors -> float32 (a differentiable Cast; its backward rounds the gradient back)
    saved     every float array the op saves for backward is packed to float16 (an input's own float16
              array when the saved array is that input's float32 copy: nothing is stored twice), and
              widened again when backward reads it
    output    rounded to float16 (a Cast)

So tensors between ops and saved activations are float16 -- the memory autocast saves -- and the values
are those of float16 storage with float32 arithmetic, as on a GPU. Pure data movement (reshape, indexing,
concatenation...) is as fast in float16 and runs directly. Real CuPy devices skip all this: their float16
kernels are native.
"""
import numpy as np

from ..autograd import extensions
from ..backend.device import get_backend
from ..backend import dtypes

_F16, _F32 = np.dtype(np.float16), np.dtype(np.float32)
# ops that only move or select elements: float16 is as fast as float32 there
MOVEMENT = frozenset({"reshape", "transpose", "permute", "expand", "getitem", "setitem", "cat", "stack", "pad",
                      "repeat", "flip", "tril", "clone", "cast", "to", "gather", "masked_fill", "embedding"})
_pending = []  # (op, {id(float32 copy): float16 original}) set by the input cast, taken by the wrapper
_upcasts = {}  # id(cached float16 weight cast) -> (that tensor, its float32 copy): one copy per region


def is_numpy_device(device):
    be = device.backend or get_backend(device)
    return be.xp is np


def upcast_inputs(op, args, kwargs, cached_ids):
    """Replace float16 tensor inputs by float32 copies; remember which copy came from which array."""
    originals = {}

    def up(t):
        if not (hasattr(t, "data") and t.data.dtype == _F16):
            return t
        hit = _upcasts.get(id(t)) if id(t) in cached_ids else None
        if hit is not None and hit[0] is t:
            t32 = hit[1]
        else:
            t32 = t.to(dtypes.float32)
            if id(t) in cached_ids:
                _upcasts[id(t)] = (t, t32)
        originals[id(t32.data)] = t.data
        return t32

    new_args = tuple(up(a) for a in args)
    new_kwargs = {k: up(v) for k, v in kwargs.items()} if kwargs else kwargs
    if originals:
        _pending.append((op, originals))
    return new_args, new_kwargs


def round_outputs(op, args, kwargs, run):
    """The forward wrapper: saved arrays packed to float16 and the output rounded, for upcast ops."""
    if not _pending or _pending[-1][0] is not op:
        return run()
    _, originals = _pending.pop()
    below = extensions._saved_hooks[-1] if extensions._saved_hooks else None  # a user's hooks, kept
    copies = {}  # id(float32 array) -> the float16 copy packed for it
    empty = get_backend(op_device(args, kwargs)).empty  # copies come from the memory pool when it is on

    def pack(a):
        if a.dtype == _F32:
            orig = originals.get(id(a))
            if orig is None:
                orig = copies[id(a)] = _converted(empty, a, _F16)
            a = orig
        return a if below is None else below[0](a)

    def unpack(obj):
        a = obj if below is None else below[1](obj)
        return _converted(empty, a, _F32) if a.dtype == _F16 else a

    with extensions.saved_tensors_hooks(pack, unpack):
        out = run()
    if out.data.dtype != _F32:
        return out
    out16 = out.to(dtypes.float16)
    node, saved_copy = out.grad_fn, copies.get(id(out.data))
    if saved_copy is not None and below is None and node is not None and node._saved:
        # the op saved its own output: keep one float16 copy, the output's, not two
        node._saved = tuple(out16.data if s is saved_copy else s for s in node._saved)
    return out16


def op_device(args, kwargs):
    for a in list(args) + list(kwargs.values()):
        if hasattr(a, "device") and hasattr(a, "data"):
            return a.device
    raise ValueError("no tensor argument")


def _converted(empty, a, dtype):
    """``a`` converted to ``dtype`` in storage from ``empty`` (keeps a's memory order)."""
    out = empty(a.shape, dtype) if a.flags.c_contiguous or not a.flags.f_contiguous else empty(a.T.shape, dtype).T
    with np.errstate(over="ignore"):  # beyond 65504 float16 is inf, as on a GPU (GradScaler's signal)
        np.copyto(out, a, casting="unsafe")
    return out


def clear():
    _pending.clear()
    _upcasts.clear()
