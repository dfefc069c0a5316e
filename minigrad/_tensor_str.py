"""How a tensor prints: PyTorch's format (``torch/_tensor_str.py``), so output reads the same on both.

Floats print with 4 decimals (``tensor([0.5000, 1.2500])``), in scientific notation when the non-zero
magnitudes span more than 1000x, exceed 1e8 or go below 1e-4, and as ``12.`` when every value is a
whole number; all elements of a tensor share one width. More than 1000 elements print summarized, three
at each edge.
"""
import math

import numpy as np

PRECISION, THRESHOLD, EDGEITEMS, LINEWIDTH = 4, 1000, 3, 80


def _shown(arr):
    """The elements that will be shown (the edges of each long dim when the tensor is summarized)."""
    if arr.size <= THRESHOLD:
        return arr
    for d in range(arr.ndim):
        n = arr.shape[d]
        if n > 2 * EDGEITEMS:
            arr = np.take(arr, list(range(EDGEITEMS)) + list(range(n - EDGEITEMS, n)), d)
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
    if sci:
        return lambda x: f"{x:.{PRECISION}e}"
    if whole:
        return lambda x: f"{x:.0f}" + ("" if math.isinf(x) or math.isnan(x) else ".")
    return lambda x: f"{x:.{PRECISION}f}"


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
    body = np.array2string(host, separator=", ", prefix=prefix, threshold=THRESHOLD, edgeitems=EDGEITEMS,
                           max_line_width=LINEWIDTH, formatter={"all": lambda x: fmt(x.item()).rjust(width)})
    return body.replace(", ..., ", ",  ..., ")   # PyTorch's summary mark in a row
