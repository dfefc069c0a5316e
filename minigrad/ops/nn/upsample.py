"""``interpolate`` (``nn.Upsample``): resize the spatial dims of (N, C, L) or (N, C, H, W) inputs.

Composed from indexing, so its gradient needs no op of its own: 'nearest' reads each output from one input
element (an advanced-index read, whose gradient scatter-adds), 'linear' / 'bilinear' mix two neighbours per
dim with fixed weights (two reads, a multiply and an add per dim), 'area' is adaptive average pooling.
Source coordinates follow PyTorch's kernels (``UpSample.h``): with ``scale_factor`` given the coordinate scale
is 1 / scale_factor (unless ``recompute_scale_factor``), else in / out, in float32 for 'nearest' as there.
"""
import math

import numpy as np  # the source indices and weights are computed on the host

from ...errors import ArgumentError, ShapeError
from .._rules import const
from ..indexing import getitem
from .pool import adaptive_avg_pool2d

MODES = {3: ("nearest", "nearest-exact", "linear", "area"), 4: ("nearest", "nearest-exact", "bilinear", "area")}
LINEAR = ("linear", "bilinear", "bicubic", "trilinear")


def _output_size(op, spatial, size, scale_factor, recompute):
    """(output sizes, the coordinate scale given by scale_factor per dim, or None per dim)."""
    n = len(spatial)
    if (size is None) == (scale_factor is None):
        raise ArgumentError(f"{op}: give exactly one of size and scale_factor")
    if size is not None:
        sizes = tuple(size) if isinstance(size, (tuple, list)) else (size,) * n
        if len(sizes) != n or not all(isinstance(s, int) and s > 0 for s in sizes):
            raise ArgumentError(f"{op}: size must be a positive int or {n} of them for a {n + 2}-D input, got {size!r}")
        return sizes, (None,) * n
    factors = tuple(scale_factor) if isinstance(scale_factor, (tuple, list)) else (scale_factor,) * n
    if len(factors) != n or not all(isinstance(f, (int, float)) and f > 0 for f in factors):
        raise ArgumentError(f"{op}: scale_factor must be a positive number or {n} of them, got {scale_factor!r}")
    sizes = tuple(int(math.floor(s * f)) for s, f in zip(spatial, factors))
    if not all(s > 0 for s in sizes):
        raise ShapeError(f"{op}: scale_factor {scale_factor!r} makes an empty output from {tuple(spatial)}")
    return sizes, (None,) * n if recompute else factors


def _nearest(n_in, n_out, factor, exact):
    scale = np.float32(1.0 / factor) if factor else np.float32(n_in) / np.float32(n_out)
    dst = np.arange(n_out, dtype=np.float32) + (np.float32(0.5) if exact else np.float32(0))
    return np.minimum(np.floor(dst * scale).astype(np.int64), n_in - 1)


def _linear(n_in, n_out, factor, align_corners, dtype):
    """(left index, right index, right weight) per output position along one dim."""
    if align_corners:
        scale = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
        src = np.arange(n_out, dtype=dtype) * dtype.type(scale)
    else:
        scale = dtype.type(1.0 / factor) if factor else dtype.type(n_in) / dtype.type(n_out)
        src = np.maximum((np.arange(n_out, dtype=dtype) + dtype.type(0.5)) * scale - dtype.type(0.5), 0)
    left = np.minimum(src.astype(np.int64), n_in - 1)
    right = np.minimum(left + 1, n_in - 1)
    return left, right, (src - left).astype(dtype)


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resize (N, C, L) with 'nearest', 'nearest-exact', 'linear' or 'area', and (N, C, H, W) with
    'nearest', 'nearest-exact', 'bilinear' or 'area', to ``size`` or by ``scale_factor`` (differentiable)."""
    op = "interpolate"
    nd = input.ndim
    if nd not in MODES:
        raise ShapeError(f"{op}: minigrad resizes 3-D (N, C, L) and 4-D (N, C, H, W) inputs, got shape "
                         f"{tuple(input.shape)}")
    if mode not in MODES[nd]:
        raise ArgumentError(f"{op}: mode {mode!r} is not supported for a {nd}-D input (minigrad has "
                            f"{', '.join(MODES[nd])})")
    if align_corners is not None and mode not in LINEAR:
        raise ArgumentError(f"{op}: align_corners can only be set with the interpolating modes (linear, "
                            f"bilinear), not {mode!r}")
    if antialias:
        raise ArgumentError(f"{op}: antialias=True is not supported by minigrad")
    spatial = tuple(input.shape[2:])
    sizes, factors = _output_size(op, spatial, size, scale_factor, recompute_scale_factor)
    if mode == "area":
        x = input if nd == 4 else input.unsqueeze(-2)
        out = adaptive_avg_pool2d(x, sizes if nd == 4 else (1,) + sizes)
        return out if nd == 4 else out.squeeze(-2)
    if mode.startswith("nearest"):
        idx = [_nearest(i, o, f, mode == "nearest-exact") for i, o, f in zip(spatial, sizes, factors)]
        index = (Ellipsis, idx[0]) if nd == 3 else (Ellipsis, idx[0][:, None], idx[1][None, :])
        return getitem(input, index)
    if input.array.dtype.kind != "f":
        raise ArgumentError(f"{op}: mode {mode!r} needs a floating-point input, got {input.dtype}")
    dtype = np.dtype(np.float64 if input.array.dtype == np.float64 else np.float32)
    out = input
    for d, (i, o, f) in enumerate(zip(spatial, sizes, factors)):
        left, right, w = _linear(i, o, f, bool(align_corners), dtype)
        axis = d - len(spatial)                                   # -1 (W) or -2 (H)
        lead = (slice(None),) * (out.ndim + axis)
        shape = (o,) + (1,) * (-axis - 1)
        weight = const(input, input.device.backend.asarray(w.reshape(shape).astype(input.array.dtype)))
        a, b = getitem(out, lead + (left,)), getitem(out, lead + (right,))
        out = a + (b - a) * weight
    return out


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """PyTorch's deprecated ``F.upsample``: ``interpolate``."""
    return interpolate(input, size, scale_factor, mode, align_corners)
