"""How a tensor prints: PyTorch's format (``torch/_tensor_str.py``), so output reads the same on both.

Floats print with 4 decimals (``tensor([0.5000, 1.2500])``), in scientific notation when the non-zero
magnitudes span more than 1000x, exceed 1e8 or go below 1e-4, and as ``12.`` when every value is a
whole number; all elements of a tensor share one width. More than 1000 elements print summarized, three
at each edge. ``set_printoptions`` changes these for the whole process, as PyTorch's does.
"""
import math
import types

import numpy as np

_PROFILES = {"default": dict(precision=4, threshold=1000, edgeitems=3, linewidth=80),
             "short": dict(precision=2, threshold=1000, edgeitems=2, linewidth=80),
             "full": dict(precision=4, threshold=math.inf, edgeitems=3, linewidth=80)}
PRINT_OPTS = types.SimpleNamespace(sci_mode=None, **_PROFILES["default"])   # process-wide, as PyTorch's


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None,
                     sci_mode=None):
    """PyTorch's ``torch.set_printoptions``: ``profile`` ('default', 'short', 'full') first, then each option
    given; ``sci_mode`` True / False forces scientific / fixed notation, None (also when omitted) chooses."""
    if profile is not None:
        if profile not in _PROFILES:
            from .errors import ArgumentError
            raise ArgumentError(f"set_printoptions: profile must be one of {sorted(_PROFILES)}, got {profile!r}")
        vars(PRINT_OPTS).update(_PROFILES[profile])
    for name, value in (("precision", precision), ("threshold", threshold), ("edgeitems", edgeitems),
                        ("linewidth", linewidth)):
        if value is not None:
            setattr(PRINT_OPTS, name, value)
    PRINT_OPTS.sci_mode = sci_mode


def get_printoptions():
    """The current print options as a dict (PyTorch's ``torch.get_printoptions``)."""
    return dict(vars(PRINT_OPTS))


def _shown(arr):
    """The elements that will be shown (the edges of each long dim when the tensor is summarized)."""
    edge = PRINT_OPTS.edgeitems
    if arr.size <= PRINT_OPTS.threshold:
        return arr
    for d in range(arr.ndim):
        n = arr.shape[d]
        if n > 2 * edge:
            arr = np.take(arr, list(range(edge)) + list(range(n - edge, n)), d)
    return arr


def _float_format(shown):
    """PyTorch's mode for these floats (whole numbers, fixed or scientific) as a ``float -> str``."""
    v = shown.astype(np.float64).ravel()
    finite = v[np.isfinite(v) & (v != 0)]
    whole = bool(np.all(finite == np.ceil(finite)))
    sci = False
    if finite.size:
        lo, hi = np.abs(finite).min(), np.abs(finite).max()
        sci = hi / lo > 1000.0 or hi > 1.0e8 or (not whole and lo < 1.0e-4)
    if PRINT_OPTS.sci_mode is not None:
        sci = PRINT_OPTS.sci_mode
    precision = PRINT_OPTS.precision
    if sci:
        return lambda x: f"{x:.{precision}e}"
    if whole:
        return lambda x: f"{x:.0f}" + ("" if math.isinf(x) or math.isnan(x) else ".")
    return lambda x: f"{x:.{precision}f}"


def array_str(host, prefix="tensor("):
    """The body of ``repr(tensor)`` for the host array ``host``, indented to follow ``prefix``."""
    if host.size == 0:
        return "[]"
    shown = _shown(host)
    kind = host.dtype.kind
    if kind == "b":
        fmt = lambda x: str(bool(x))
    elif kind in "iu":
        fmt = str
    else:
        fmt = _float_format(shown)
        shown = shown.astype(np.float64)
        host = host.astype(np.float32) if kind != "f" else host    # bfloat16: NumPy prints it as float32
    width = max(len(fmt(x)) for x in shown.ravel().tolist())
    threshold = PRINT_OPTS.threshold if PRINT_OPTS.threshold != math.inf else host.size
    body = np.array2string(host, separator=", ", prefix=prefix, threshold=threshold, edgeitems=PRINT_OPTS.edgeitems,
                           max_line_width=PRINT_OPTS.linewidth, formatter={"all": lambda x: fmt(x.item()).rjust(width)})
    return body.replace(", ..., ", ",  ..., ")   # PyTorch's summary mark in a row
