"""``autocast``: run each op in the dtype the policy table (policy.py) gives it, casting inputs on the fly.

Parameters stay float32 (the master weights, PyTorch's design); a LOWER op (matmul, linear, conv,
attention) gets float16 copies of its float32 inputs, a FLOAT32 op (softmax, losses, norms, reductions)
gets float32 copies of float16 ones. The casts are ordinary differentiable ``Cast`` ops, so backward
needs no special case: each op's gradient is computed in the dtype its forward ran in (its saved arrays
and its output have that dtype), and each cast's backward converts the gradient back to its input's
dtype -- a float32 parameter gets a float32 ``.grad``.

It plugs into the core at ``input_casts`` (and, for NumPy devices, a forward wrapper: NumPy has no float16
arithmetic, so there float16 ops compute in float32 on float16 storage -- _numpy_opmath.py), registered
only while an enabled autocast region is active: outside one, ops pay nothing.

State is per device type ('cpu', 'cuda'): autocast for 'cuda' leaves cpu tensors alone. Within the
outermost region, float32 leaf tensors that require grad (parameters) are cast once per region and
dtype and the cast reused (PyTorch's weight-cast cache); an in-place change of the parameter
invalidates its entry. Deliberate differences from PyTorch: the default dtype is float16 on 'cpu' too
(PyTorch picks bfloat16), and minigrad's autocast is process-wide rather than thread-local.
"""
import functools

from ..autograd import extensions, grad_mode
from ..backend import dtypes
from ..errors import ArgumentError, DTypeError
from ..tensor import Tensor
from . import _numpy_opmath as opmath
from .policy import FLOAT32, LOWER, POLICY

_ELIGIBLE = (dtypes.float16.np_dtype, dtypes.float32.np_dtype)
_LOW = (dtypes.float16,)
_active = {}      # device type -> the low-precision DType of the innermost region (None: disabled there)
_depth = [0]      # number of open regions (enabled or not); the cast cache lives while it is > 0
_cache = {}       # (id(param), np dtype, grad enabled) -> (param, version, cast)
_cached_ids = set()  # ids of the cached casts (their float32 copies on NumPy are cached too)
_handle = []      # the input_casts and forward_wrappers registrations while an enabled region is open
_cache_on = [True]  # the weight-cast cache is used (off inside a cache_enabled=False region)


def is_autocast_enabled(device_type="cuda"):
    return _active.get(device_type) is not None


def get_autocast_dtype(device_type="cuda"):
    """The low-precision dtype autocast uses on ``device_type`` (float16 by default)."""
    return _active.get(device_type) or dtypes.float16


def clear_autocast_cache():
    _cache.clear()
    _cached_ids.clear()
    opmath.clear()


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
        self._saved = []

    def __enter__(self):
        self._saved.append((_active.get(self.device_type), _cache_on[0]))
        _active[self.device_type] = self.fast_dtype if self.enabled else None
        _depth[0] += 1
        if self.enabled and not self.cache_enabled:
            _cache_on[0] = False
        _sync_registration()
        return self

    def __exit__(self, *exc):
        previous, cache = self._saved.pop()
        _active[self.device_type] = previous
        _cache_on[0] = cache
        _depth[0] -= 1
        if _depth[0] == 0:
            _cache.clear()  # casts of parameters are valid for one region (one forward), as in PyTorch
            _cached_ids.clear()
            opmath.clear()
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
    want = any(v is not None for v in _active.values())
    if want and not _handle:
        _handle[:] = [extensions.input_casts.add(autocast_inputs),
                      extensions.forward_wrappers.add(opmath.round_outputs)]
    elif not want and _handle:
        for h in _handle:
            h.remove()
        _handle.clear()


def autocast_inputs(op, args, kwargs):
    """The ``input_casts`` callback: cast ``op``'s floating tensor inputs as the policy says (and, on a
    NumPy device, give ops float32 copies of float16 inputs: _numpy_opmath.py)."""
    first = next((a for a in args if isinstance(a, Tensor)), None)
    if first is None:
        first = next((v for v in kwargs.values() if isinstance(v, Tensor)), None)
        if first is None:
            return args, kwargs
    low = _active.get(first.device.type)
    if low is None:
        return args, kwargs
    rule = POLICY.get(op.name)
    target = None
    if rule is LOWER:
        target = low.np_dtype
    elif rule is FLOAT32:
        target = dtypes.float32.np_dtype
    elif rule is not None:  # PROMOTE: the widest eligible floating dtype among the inputs
        found = {a.data.dtype for a in _tensors(args, kwargs) if a.data.dtype in _ELIGIBLE}
        if len(found) > 1:
            target = max(found, key=lambda d: d.itemsize)
    if target is not None:
        args = tuple(_cast(a, target) if isinstance(a, Tensor) else a for a in args)
        if kwargs:
            kwargs = {k: _cast(v, target) if isinstance(v, Tensor) else v for k, v in kwargs.items()}
    if op.name not in opmath.MOVEMENT and opmath.is_numpy_device(first.device):
        args, kwargs = opmath.upcast_inputs(op, args, kwargs, _cached_ids)
    return args, kwargs


def _tensors(args, kwargs):
    yield from (a for a in args if isinstance(a, Tensor))
    yield from (v for v in kwargs.values() if isinstance(v, Tensor))


def _cast(t, target):
    dt = t.data.dtype
    if dt == target or dt not in _ELIGIBLE:
        return t
    if not (_cache_on[0] and t.requires_grad and t.grad_fn is None):
        return t.to(dtypes.from_numpy_dtype(target))
    key = (id(t), target, grad_mode.is_grad_enabled())
    hit = _cache.get(key)
    if hit is not None and hit[0] is t and hit[1] == t._version_counter.value:
        return hit[2]
    out = t.to(dtypes.from_numpy_dtype(target))
    _cache[key] = (t, t._version_counter.value, out)
    _cached_ids.add(id(out))
    return out
