"""Factories: ``zeros``, ``ones``, ``full``, ``arange``, ``rand``... All storage comes from the backend's
``empty`` (the memory pool's hook); random values are drawn on the host from a seeded Generator."""
import numpy as np

from .autograd.extensions import outside_apply
from .backend import dtypes
from .backend.device import device as _device, get_backend
from .errors import ArgumentError, DTypeError
from .random import host_rng
from .tensor import Tensor, tensor


def _shape(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    shape = tuple(int(s) for s in size)
    if any(s < 0 for s in shape):
        raise ArgumentError(f"negative dimension in size {shape}")
    return shape


def _new(shape, dtype, device, requires_grad, fill=None):
    dev = _device(device)
    dt = dtypes.to_dtype(dtype) if dtype is not None else dtypes.default_float
    arr = get_backend(dev).empty(shape, dt.np_dtype)
    if fill is not None:
        arr[...] = fill
    t = Tensor._make(arr, dev)
    return t.requires_grad_(True) if requires_grad else t


@outside_apply
def empty(*size, dtype=None, device=None, requires_grad=False):
    return _new(_shape(size), dtype, device, requires_grad)


@outside_apply
def zeros(*size, dtype=None, device=None, requires_grad=False):
    return _new(_shape(size), dtype, device, requires_grad, 0)


@outside_apply
def ones(*size, dtype=None, device=None, requires_grad=False):
    return _new(_shape(size), dtype, device, requires_grad, 1)


@outside_apply
def full(size, fill_value, dtype=None, device=None, requires_grad=False):
    if dtype is None:
        dtype = dtypes.bool_ if isinstance(fill_value, bool) else \
            dtypes.int64 if isinstance(fill_value, int) else dtypes.default_float
    return _new(_shape((size,) if isinstance(size, int) else (tuple(size),)), dtype, device, requires_grad,
                fill_value)


def _like(t, dtype, device):
    return (dtype if dtype is not None else t.dtype), (device if device is not None else t.device)


@outside_apply
def empty_like(t, dtype=None, device=None, requires_grad=False):
    d, dev = _like(t, dtype, device)
    return _new(t.shape, d, dev, requires_grad)


@outside_apply
def zeros_like(t, dtype=None, device=None, requires_grad=False):
    d, dev = _like(t, dtype, device)
    return _new(t.shape, d, dev, requires_grad, 0)


@outside_apply
def ones_like(t, dtype=None, device=None, requires_grad=False):
    d, dev = _like(t, dtype, device)
    return _new(t.shape, d, dev, requires_grad, 1)


@outside_apply
def full_like(t, fill_value, dtype=None, device=None, requires_grad=False):
    d, dev = _like(t, dtype, device)
    return _new(t.shape, d, dev, requires_grad, fill_value)


def _from_host(host, dtype, device, requires_grad):
    return tensor(host, dtype=dtype, device=device, requires_grad=requires_grad)


@outside_apply
def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False):
    if end is None:
        start, end = 0, start
    if step == 0:
        raise ArgumentError("arange: step must be nonzero")
    is_int = all(isinstance(v, (int, np.integer)) for v in (start, end, step))
    dt = dtype if dtype is not None else (dtypes.int64 if is_int else dtypes.default_float)
    return _from_host(np.arange(start, end, step), dt, device, requires_grad)


@outside_apply
def linspace(start, end, steps, dtype=None, device=None, requires_grad=False):
    return _from_host(np.linspace(start, end, steps), dtype or dtypes.default_float, device, requires_grad)


@outside_apply
def eye(n, m=None, dtype=None, device=None, requires_grad=False):
    return _from_host(np.eye(n, m), dtype or dtypes.default_float, device, requires_grad)


def _float_dtype(dtype, op):
    dt = dtypes.to_dtype(dtype) if dtype is not None else dtypes.default_float
    if not dt.is_floating_point:
        raise DTypeError(f"{op}: needs a floating point dtype, got {dt.name}")
    return dt


@outside_apply
def rand(*size, generator=None, dtype=None, device=None, requires_grad=False):
    dtype = _float_dtype(dtype, "rand")
    host = host_rng(generator).random(_shape(size))
    return _from_host(host, dtype or dtypes.default_float, device, requires_grad)


@outside_apply
def randn(*size, generator=None, dtype=None, device=None, requires_grad=False):
    dtype = _float_dtype(dtype, "randn")
    host = host_rng(generator).standard_normal(_shape(size))
    return _from_host(host, dtype or dtypes.default_float, device, requires_grad)


@outside_apply
def randint(low, high=None, size=None, generator=None, dtype=None, device=None):
    if size is None and isinstance(high, (tuple, list)):  # randint(high, size), as in PyTorch
        low, high, size = 0, low, high
    if high is None:
        low, high = 0, low
    if size is None:
        raise ArgumentError("randint: size is required")
    if high <= low:
        raise ArgumentError(f"randint: empty range [{low}, {high})")
    host = host_rng(generator).integers(low, high, _shape((size,) if isinstance(size, int) else (tuple(size),)))
    return _from_host(host, dtype or dtypes.int64, device, False)


@outside_apply
def randperm(n, generator=None, dtype=None, device=None):
    return _from_host(host_rng(generator).permutation(n), dtype or dtypes.int64, device, False)


@outside_apply
def multinomial(input, num_samples, replacement=False, *, generator=None):
    """Draw ``num_samples`` category indices per row of ``input`` (1-D or 2-D non-negative weights, not
    necessarily normalised); int64, on ``input``'s device. Without replacement a category is drawn at
    most once per row (so ``num_samples`` may not exceed the categories with non-zero weight)."""
    if not isinstance(input, Tensor) or input.ndim not in (1, 2):
        raise ArgumentError(f"multinomial: input must be a 1-D or 2-D tensor of weights, got "
                            f"{getattr(input, 'shape', type(input).__name__)}")
    w = np.asarray(input.detach().numpy(), dtype=np.float64)
    rows = w.reshape(1, -1) if w.ndim == 1 else w
    if not np.all(np.isfinite(rows)) or np.any(rows < 0):
        raise ArgumentError("multinomial: probability tensor contains either inf, nan or an element < 0")
    n = int(num_samples)
    if n <= 0:
        raise ArgumentError(f"multinomial: num_samples must be positive, got {num_samples}")
    rng = host_rng(generator)
    out = np.empty((rows.shape[0], n), dtype=np.int64)
    for i, row in enumerate(rows):
        total = row.sum()
        if total <= 0:
            raise ArgumentError(f"multinomial: row {i} of the weights sums to 0 (shape {tuple(input.shape)})")
        if replacement:   # inverse CDF: one uniform number per sample
            out[i] = np.searchsorted(np.cumsum(row), rng.random(n) * total, side="right")
            out[i] = np.minimum(out[i], row.size - 1)
        else:
            if n > np.count_nonzero(row):
                raise ArgumentError(f"multinomial: cannot draw {n} samples without replacement from row {i}, "
                                    f"which has {np.count_nonzero(row)} categories of non-zero weight")
            out[i] = rng.choice(row.size, size=n, replace=False, p=row / total)
    return _from_host(out.reshape(n) if w.ndim == 1 else out, dtypes.int64, input.device, False)


@outside_apply
def rand_like(t, generator=None, dtype=None, device=None, requires_grad=False):
    d, dev = _like(t, dtype, device)
    return rand(*t.shape, generator=generator, dtype=d, device=dev, requires_grad=requires_grad)


@outside_apply
def randn_like(t, generator=None, dtype=None, device=None, requires_grad=False):
    d, dev = _like(t, dtype, device)
    return randn(*t.shape, generator=generator, dtype=d, device=dev, requires_grad=requires_grad)


@outside_apply
def from_numpy(array):
    """A tensor with ``array``'s values and dtype (copied: minigrad storage belongs to the backend)."""
    return tensor(np.asarray(array))


@outside_apply
def as_tensor(data, dtype=None, device=None):
    if isinstance(data, Tensor) and (dtype is None or data.dtype == dtypes.to_dtype(dtype)) and \
            (device is None or data.device == _device(device)):
        return data
    return tensor(data, dtype=dtype, device=device)
