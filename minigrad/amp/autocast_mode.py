"""``autocast``: each op runs in the dtype the policy table (policy.py) gives it, cast inside its dispatch.

Parameters stay float32 (the master weights, PyTorch's design); a LOWER op (matmul, linear, conv,
attention) runs on float16 copies of its float32 inputs, a FLOAT32 op (softmax, losses, norms, reductions)
on float32 copies of float16 ones. The casts are not ops: autocast plugs into the core at ``input_casts``
and answers, per op, an ``extensions.Casts`` (the dtype to run in); ``Function.apply`` converts the inputs
inside the op's own dispatch, so each op stays one graph node (``autograd/opmath.py``), its saved arrays
and output are stored in that dtype, and each input's gradient comes back in that input's dtype (a
float32 parameter gets a float32 ``.grad``).

On NumPy devices (cpu, the cuda emulator) float16 ops compute in float32 on float16 storage: NumPy has no
float16 arithmetic, so a float16 op gets ``Casts(float16, compute=float32)``, as PyTorch's CPU kernels
compute in an *opmath* type. Ops that only move elements (``MOVEMENT``: reshape, indexing, concatenation)
run on float16 directly. On a GPU float16 is computed natively.

State is per thread and per device type ('cpu', 'cuda'): autocast for 'cuda' leaves cpu tensors alone,
and another thread's ops are not affected. Within the outermost region of a thread, float32 leaf tensors
that require grad (parameters) are cast once per region (PyTorch's weight-cast cache: a dict keyed by the
parameter itself, emptied when the region ends); an in-place change of the parameter makes its entry
stale. ``dtype=mg.bfloat16`` works as float16 does (bfloat16 storage, float32 arithmetic on NumPy).
Deliberate difference from PyTorch: the default dtype is float16 on 'cpu' too (PyTorch picks bfloat16;
minigrad's course material and GradScaler lessons are written for float16).
"""
import contextvars
import functools

import numpy as np

from ..autograd import extensions
from ..autograd.opmath import convert
from ..backend import dtypes
from ..backend.device import get_backend
from ..errors import ArgumentError, DTypeError
from ..tensor import Tensor
from .policy import FLOAT32, LOWER, MOVEMENT, POLICY

_F16, _F32, _BF16 = np.dtype(np.float16), np.dtype(np.float32), dtypes.bfloat16.np_dtype
_ELIGIBLE = (_F16, _BF16, _F32)   # only these are cast (PyTorch's rule): float64 and integers pass through
_LOW = (dtypes.float16, dtypes.bfloat16)


class _Region:
    """A thread's autocast state: the low dtype per device type (None: disabled there), whether the
    weight-cast cache is used, and the cache itself (shared by the regions nested in the outermost)."""
    __slots__ = ("low", "cache_on", "cache")

    def __init__(self, low, cache_on, cache):
        self.low, self.cache_on, self.cache = low, cache_on, cache


_region = contextvars.ContextVar("minigrad.autocast", default=None)


def is_autocast_enabled(device_type="cuda"):
    r = _region.get()
    return r is not None and r.low.get(device_type) is not None


def get_autocast_dtype(device_type="cuda"):
    """The low-precision dtype autocast uses on ``device_type`` (float16 by default)."""
    r = _region.get()
    low = None if r is None else r.low.get(device_type)
    return dtypes.float16 if low is None else dtypes.from_numpy_dtype(low)


def clear_autocast_cache():
    r = _region.get()
    if r is not None:
        r.cache.clear()


class autocast:
    """``with mg.autocast(device_type='cpu', dtype=mg.float16, enabled=True):`` or ``@mg.autocast(...)``.

    Regions nest: an inner region (``enabled=False`` to run a piece in full precision, or another dtype)
    replaces the outer one's setting for its device type until it exits. ``cache_enabled=False`` turns
    off the weight-cast cache for the region.
    """

    def __init__(self, device_type="cuda", dtype=None, enabled=True, cache_enabled=True):
        if device_type not in ("cpu", "cuda"):
            raise ArgumentError(f"autocast: device_type must be 'cpu' or 'cuda', got {device_type!r}")
        dt = dtypes.float16 if dtype is None else dtypes.to_dtype(dtype)
        if enabled and dt not in _LOW:
            raise DTypeError(f"autocast: dtype must be one of {[d.name for d in _LOW]} (the low precision ops "
                             f"run in), got {dt.name}")
        self.device_type, self.fast_dtype, self.enabled = device_type, dt, bool(enabled)
        self.cache_enabled = bool(cache_enabled)
        self._outer = []

    def __enter__(self):
        prev = _region.get()
        low = dict(prev.low) if prev is not None else {}
        low[self.device_type] = self.fast_dtype.np_dtype if self.enabled else None
        cache_on = (prev is None or prev.cache_on) and not (self.enabled and not self.cache_enabled)
        self._outer.append(prev)
        _region.set(_Region(low, cache_on, {} if prev is None else prev.cache))
        _sync_registration()
        return self

    def __exit__(self, *exc):
        prev = self._outer.pop()
        if prev is None:
            _region.get().cache.clear()  # casts of parameters are valid for one region (one forward)
        _region.set(prev)
        _sync_registration()
        return False

    def __call__(self, fn):
        """Decorator: ``fn`` runs inside a fresh region with these settings on every call."""
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with autocast(self.device_type, self.fast_dtype, self.enabled, self.cache_enabled):
                return fn(*args, **kwargs)
        return wrapper


def _sync_registration():
    """Registered at ``input_casts`` (for this thread) exactly while some device type is enabled, so ops
    in a disabled region take the plain path."""
    r = _region.get()
    want = r is not None and any(v is not None for v in r.low.values())
    have = "autocast" in extensions.input_casts.names()
    if want and not have:
        extensions.input_casts.add(casts_for, "autocast")
    elif have and not want:
        extensions.input_casts.remove("autocast")


def casts_for(op, args, kwargs):
    """The ``input_casts`` callback: the ``Casts`` the policy gives ``op`` here, or None (run as it is)."""
    device = extensions.device_of(args)
    if device is None:
        return None
    r = _region.get()
    low = None if r is None else r.low.get(device.type)
    if low is None:
        return None
    rule = POLICY.get(op.name)
    found = {a.array.dtype for a in args if isinstance(a, Tensor) and a.array.dtype in _ELIGIBLE}
    if rule is LOWER:
        target = low
    elif rule is FLOAT32:
        target = _F32
    elif rule is not None and len(found) > 1:   # PROMOTE: mixed float16/float32 inputs go to the widest
        target = max(found, key=lambda d: d.itemsize)
    elif low in found and op.name not in MOVEMENT:
        target = low                            # the op runs in its inputs' (low) dtype
    else:
        return None
    if target in found and len(found) == 1 and not _opmath(device, target, op):
        return None                             # nothing to convert, nothing to compute differently
    compute = _F32 if _opmath(device, target, op) else target
    return extensions.Casts(target, compute, functools.partial(_cast, r, target, compute))


def _opmath(device, target, op):
    """Does ``op`` compute in float32 on ``target`` storage here? On NumPy devices, float16 and bfloat16
    ops do."""
    return (target == _F16 or target == _BF16) and op.name not in MOVEMENT and \
        (device.backend or get_backend(device)).xp is np


def _cast(region, target, compute, t):
    """``(stored, computed)`` arrays of tensor ``t`` for an op running at ``target`` (computing in
    ``compute``): parameters are cast once per region and the casts reused."""
    a = t.array
    if a.dtype not in _ELIGIBLE:
        return a, a
    if not (region.cache_on and t.requires_grad and t.grad_fn is None):
        return _converted(t, target, compute)
    casts = region.cache.setdefault(t, {})   # keyed by the parameter itself (held until the region ends)
    hit = casts.get((target, compute))
    version = t._version
    if hit is None or hit[0] != version:
        hit = casts[(target, compute)] = (version,) + _converted(t, target, compute)
    return hit[1], hit[2]


def _converted(t, target, compute):
    be = t.device.backend or get_backend(t.device)
    stored = t.array if t.array.dtype == target else convert(be, t.array, target)
    return stored, stored if compute == target else convert(be, stored, compute)
