"""Pooling: max_pool{1,2}d, avg_pool{1,2}d (strided window views, any overlap) and adaptive_avg_pool2d.

Windows are a strided view of the padded input (N, C, *out, *k). Backward walks the kernel offsets: for one
offset, the input positions it touched are a strided slice with no repeats, so ``dx[slice] += g`` is exact
even when windows overlap (they accumulate across offsets).
"""
import itertools
import math

import numpy as np  # the adaptive pooling matrices are built on the host

from ...autograd.extensions import outside_apply
from ...autograd.function import Function
from ...backend.layout import empty_in_order, in_order, memory_order
from ...errors import ArgumentError, ShapeError
from .._args import wrap
from .._rules import const, tsum
from ._util import kernel_slices, ntuple, pad_spatial, windows


def pool_geometry(spatial, kernel, stride, pads, dilation, ceil_mode):
    """Output sizes and the extra right padding that ceil_mode needs (PyTorch's pooling_output_shape)."""
    out, extra = [], []
    for n, k, s, p, d in zip(spatial, kernel, stride, pads, dilation):
        span = n + 2 * p - d * (k - 1) - 1
        o = (span + (s - 1 if ceil_mode else 0)) // s + 1
        if ceil_mode and (o - 1) * s >= n + p:  # the last window must start inside the input or left pad
            o -= 1
        out.append(o)
        extra.append(max(0, (o - 1) * s + d * (k - 1) + 1 - (n + 2 * p)))
    return tuple(out), tuple(extra)


def _check_pool(op, nd, x, kernel, stride, pads, dilation, ceil_mode):
    if x.ndim not in (nd + 1, nd + 2):
        raise ShapeError(f"{op}: expected a {nd + 2}-D (N, C, ...) or {nd + 1}-D (C, ...) input, "
                         f"got shape {tuple(x.shape)}")
    spatial = tuple(x.shape[-nd:])
    for k, p, d in zip(kernel, pads, dilation):
        if p > (d * (k - 1) + 1) // 2:
            raise ArgumentError(f"{op}: padding {p} should be at most half of the effective kernel size "
                                f"{d * (k - 1) + 1} (kernel_size={k}, dilation={d})")
    out, _ = pool_geometry(spatial, kernel, stride, pads, dilation, ceil_mode)
    if any(o < 1 or n + 2 * p < d * (k - 1) + 1 for o, n, k, p, d in zip(out, spatial, kernel, pads, dilation)):
        raise ShapeError(f"{op}: input spatial size {spatial} with padding {tuple(pads)} is too "
                         f"small for kernel size {tuple(kernel)} (dilation {tuple(dilation)})")


def _pad(ctx, x, value):
    """The input padded by ``padding`` on both sides plus ceil_mode's extra on the right."""
    return pad_spatial(ctx, x, tuple((p, p + e) for p, e in zip(ctx.pads, ctx.extra)), value)


def _batched(ctx, x):
    """(N, C, *spatial): an unbatched (C, *spatial) input gets N = 1 (``ctx.unbatched`` remembers it)."""
    ctx.unbatched = x.ndim == ctx.nd + 1
    return x[None] if ctx.unbatched else x


def _col2im(ctx, xp, shape, dtype, order, contributions):
    """Sum contributions(offset, dst) -> (N, C, *out) into a zero (padded) input of ``shape`` laid out in
    memory in ``order`` (the input's: see backend/layout.py) and crop the padding. When windows are
    disjoint, contributions write straight into ``dst``, the slice the offset touches (no add), else
    ``dst`` is None and they return what to add; zero-filling is skipped when the windows tile the input."""
    spatial = shape[2:]
    padded = tuple(n + 2 * p + e for n, p, e in zip(spatial, ctx.pads, ctx.extra))
    dxp = empty_in_order(ctx.empty, shape[:2] + padded, dtype, order)
    disjoint = all(d == 1 for d in ctx.dilation) and all(s >= k for s, k in zip(ctx.stride, ctx.kernel))
    tiles = disjoint and all(s == k and o * s == n for s, k, o, n in zip(ctx.stride, ctx.kernel, ctx.out, padded))
    if not tiles:
        dxp.fill(0)     # overlapping windows accumulate; gaps and an uncovered border stay zero
    for offs in itertools.product(*(range(k) for k in ctx.kernel)):
        dst = dxp[(slice(None), slice(None)) + kernel_slices(offs, ctx.out, ctx.stride, ctx.dilation)]
        if disjoint:
            contributions(offs, dst)
        else:
            dst += contributions(offs, None)
    dx = dxp[(slice(None), slice(None)) + tuple(slice(p, p + n) for n, p in zip(spatial, ctx.pads))]
    return dx[0] if ctx.unbatched else dx


def _first_max_hits(ctx, xp, padded, out):
    """Yield, per kernel offset in row-major order, where that offset holds its window's first maximum
    (NaN counts as the maximum, as in PyTorch). Each output position is hit exactly once."""
    nan = out.dtype.kind == "f" and bool((out != out).any())
    found = None
    for offs in itertools.product(*(range(n) for n in ctx.kernel)):
        cand = padded[(slice(None), slice(None)) + kernel_slices(offs, ctx.out, ctx.stride, ctx.dilation)]
        hit = cand == out
        if nan:
            hit |= cand != cand
        if found is None:
            found = hit.copy(order="K")
        else:
            xp.greater(hit, found, out=hit)     # hit and not yet found: a tie goes to the first offset
            found |= hit
        yield hit


class _MaxPoolNd(Function):
    """Forward keeps only the running maximum (one ``maximum`` per kernel offset: masked copies and an
    argmax over a tiny last axis are ~10x slower in NumPy); backward finds where each maximum came from by
    comparing the (padded) input with the output, so nothing extra is saved: both are already alive as
    the previous op's output and the next op's input. Given a list as ``indices_sink``, forward appends
    PyTorch's ``return_indices`` to it (a Function has one output, and the indices have no gradient)."""
    nd = 0

    @staticmethod
    def forward(ctx, x, *, kernel, stride, pads, dilation, ceil_mode, indices_sink):
        xp, nd = ctx.xp, ctx.nd
        x4 = _batched(ctx, x)
        ctx.out, ctx.extra = pool_geometry(x4.shape[2:], kernel, stride, pads, dilation, ceil_mode)
        ctx.kernel, ctx.stride, ctx.pads, ctx.dilation = kernel, stride, pads, dilation
        low = -xp.inf if x.dtype.kind == "f" else xp.iinfo(x.dtype).min
        padded = _pad(ctx, x4, low)
        cands = [padded[(slice(None), slice(None)) + kernel_slices(offs, ctx.out, stride, dilation)]
                 for offs in itertools.product(*(range(n) for n in kernel))]
        out = ctx.empty_like(cands[0].shape, x.dtype, x4)          # x's layout (channels-last stays)
        if len(cands) == 1:
            out[...] = cands[0]
        else:
            xp.maximum(cands[0], cands[1], out=out)                 # NaN propagates, as in PyTorch
        for cand in cands[2:]:
            xp.maximum(out, cand, out=out)
        result = out[0] if ctx.unbatched else out
        ctx.save_for_backward(x, result)
        if indices_sink is not None:  # flat index into each input plane, as PyTorch's return_indices
            arg = xp.zeros(out.shape, dtype=xp.int64)
            for k, hit in enumerate(_first_max_hits(ctx, xp, padded, out)):
                arg += hit * k
            flat = 0
            for dim in range(nd):
                k_dim = (arg // math.prod(kernel[dim + 1:])) % kernel[dim]
                pos = xp.arange(ctx.out[dim]).reshape((-1,) + (1,) * (nd - 1 - dim)) * stride[dim]
                coord = pos + k_dim * dilation[dim] - pads[dim]
                flat = flat * x4.shape[2 + dim] + coord
            flat = flat.astype("int64")
            indices_sink.append(flat[0] if ctx.unbatched else flat)
        return result

    @staticmethod
    def backward(ctx, grad):
        xp = ctx.xp
        x, out = ctx.saved_tensors
        if ctx.unbatched:
            x, out, grad = x[None], out[None], grad[None]
        low = -xp.inf if x.dtype.kind == "f" else xp.iinfo(x.dtype).min
        hits = _first_max_hits(ctx, xp, _pad(ctx, x, low), out)
        order = memory_order(x)
        grad = in_order(grad, memory_order(out), ctx.empty)     # one copy if the layouts differ
        contributions = lambda offs, dst: xp.multiply(grad, next(hits), out=dst)  # noqa: E731
        return _col2im(ctx, xp, x.shape, x.dtype, order, contributions)

    # Beyond first order: max pooling is linear in x where the maxima stay put (piecewise linear), so its
    # tangent is the tangent picked at the maxima, and its vjp the transpose of that, both in minigrad ops
    @staticmethod
    def vjp(ctx, grad):
        x, out = ctx.node.saved_tensors
        return _transpose(ctx, lambda t: _max_tangent(ctx, x, out, t), x, grad)

    @classmethod
    def jvp(cls, primals, tangents, out, **options):
        return _max_tangent(_geometry(cls, primals[0], **options), primals[0].array, out.array, tangents[0])


class MaxPool1d(_MaxPoolNd):
    name = "max_pool1d"
    nd = 1


class MaxPool2d(_MaxPoolNd):
    name = "max_pool2d"
    nd = 2


class _AvgPoolNd(Function):
    nd = 0

    @staticmethod
    def forward(ctx, x, *, kernel, stride, pads, ceil_mode, count_include_pad, divisor_override):
        xp, nd = ctx.xp, ctx.nd
        x4 = _batched(ctx, x)
        dilation = (1,) * nd
        spatial = x4.shape[2:]
        ctx.out, ctx.extra = pool_geometry(spatial, kernel, stride, pads, dilation, ceil_mode)
        ctx.kernel, ctx.stride, ctx.pads, ctx.dilation = kernel, stride, pads, dilation
        ctx.in_shape, ctx.dtype, ctx.order = x4.shape, x.dtype, memory_order(x4)
        win = windows(xp, _pad(ctx, x4, 0), kernel, stride, dilation)
        total = win.sum(axis=tuple(range(2 + nd, 2 + 2 * nd)))
        if divisor_override is not None:
            div = float(divisor_override)
        elif count_include_pad and not any(ctx.extra):
            div = float(math.prod(kernel))
        else:  # PyTorch: the window clipped to [-p, n + p) (or to [0, n) without count_include_pad)
            div = 1.0
            for dim, (n, k, s, p) in enumerate(zip(spatial, kernel, stride, pads)):
                start = xp.arange(ctx.out[dim]) * s - p
                end = xp.minimum(start + k, n + p)
                if not count_include_pad:
                    start, end = xp.maximum(start, 0), xp.minimum(end, n)
                div = div * (end - start).reshape((-1,) + (1,) * (nd - 1 - dim))
            div = div.astype(x.dtype)
        ctx.div = div
        out = total / div
        return out[0] if ctx.unbatched else out

    @staticmethod
    def backward(ctx, grad):
        g = (grad[None] if ctx.unbatched else grad) / ctx.div
        contributions = lambda offs, dst: g if dst is None else ctx.xp.copyto(dst, g)  # noqa: E731
        return _col2im(ctx, ctx.xp, ctx.in_shape, ctx.dtype, ctx.order, contributions)

    @staticmethod
    def vjp(ctx, grad):   # linear: the transpose of the window sums, in minigrad ops
        like = ctx.xp.zeros(ctx.in_shape[1:] if ctx.unbatched else ctx.in_shape, grad.array.dtype)
        return _transpose(ctx, lambda t: _avg_tangent(ctx, t), like, grad)

    @classmethod
    def jvp(cls, primals, tangents, out, **options):
        return cls.apply(tangents[0], **options)


class AvgPool1d(_AvgPoolNd):
    name = "avg_pool1d"
    nd = 1


class AvgPool2d(_AvgPoolNd):
    name = "avg_pool2d"
    nd = 2


def _adaptive_matrix(xp, n_in, n_out, dtype):
    """(n_out, n_in) averaging matrix: row i averages [floor(i n/o), ceil((i+1) n/o)) as PyTorch."""
    m = np.zeros((n_out, n_in))
    for i in range(n_out):
        start = (i * n_in) // n_out
        end = -((-(i + 1) * n_in) // n_out)
        m[i, start:end] = 1.0 / (end - start)
    return xp.asarray(m.astype(dtype))


class AdaptiveAvgPool2d(Function):
    """Each output is the mean of a rectangle, so out = A_h @ x @ A_w^T with two averaging matrices;
    exact for any input/output sizes (windows may overlap when the sizes do not divide)."""
    name = "adaptive_avg_pool2d"

    @staticmethod
    def forward(ctx, x, *, output_size):
        xp = ctx.xp
        H, W = x.shape[-2:]
        oh = H if output_size[0] is None else output_size[0]
        ow = W if output_size[1] is None else output_size[1]
        ctx.ah = _adaptive_matrix(xp, H, oh, x.dtype)
        ctx.aw = _adaptive_matrix(xp, W, ow, x.dtype)
        return ctx.ah @ (x @ ctx.aw.T)

    @staticmethod
    def backward(ctx, grad):
        return ctx.ah.T @ (grad @ ctx.aw)

    @staticmethod
    def vjp(ctx, grad):
        return const(ctx, ctx.ah.T) @ (grad @ const(ctx, ctx.aw))

    @staticmethod
    def jvp(primals, tangents, out, output_size):
        return AdaptiveAvgPool2d.apply(tangents[0], output_size=output_size)


# --- the tangents of pooling in minigrad ops (forward mode, and transposed: the vjp for higher order) ---
class _Geometry:
    """A pooling's geometry as its forward computes it, for tangents outside a node (forward mode)."""
    empty, empty_like = Function.empty, Function.empty_like

    def __init__(self, nd, x, kernel, stride, pads, dilation, ceil_mode):
        self.nd, self.device, self.xp = nd, x.device, x.device.xp
        self.unbatched = x.ndim == nd + 1
        self.out, self.extra = pool_geometry(x.shape[-nd:], kernel, stride, pads, dilation, ceil_mode)
        self.kernel, self.stride, self.pads, self.dilation = kernel, stride, pads, dilation


def _geometry(cls, x, kernel, stride, pads, dilation=None, ceil_mode=False, **_):
    return _Geometry(cls.nd, x, kernel, stride, pads, dilation or (1,) * cls.nd, ceil_mode)


def _window_slices(geo, t):
    """The tangent ``t`` zero-padded like the input, cut into one strided slice per kernel offset."""
    from ..shape_copy import Pad
    t4 = t.unsqueeze(0) if geo.unbatched else t
    widths = ((0, 0), (0, 0)) + tuple((p, p + e) for p, e in zip(geo.pads, geo.extra))
    tp = Pad.apply(t4, widths=widths, value=0.0) if any(map(any, widths)) else t4
    return [tp[(slice(None), slice(None)) + kernel_slices(offs, geo.out, geo.stride, geo.dilation)]
            for offs in itertools.product(*(range(k) for k in geo.kernel))]


def _max_tangent(geo, x, out, t):
    """max pooling's tangent: ``t`` at each window's (first) maximum (x, out: the arrays)."""
    from ..elementwise import where
    xp = geo.xp
    x4, out4 = (x[None], out[None]) if geo.unbatched else (x, out)
    low = -xp.inf if x.dtype.kind == "f" else xp.iinfo(x.dtype).min
    hits = _first_max_hits(geo, xp, _pad(geo, x4, low), out4)
    res = tsum(*(where(const(t, hit), part, 0.0) for hit, part in zip(hits, _window_slices(geo, t))))
    return res[0] if geo.unbatched else res


def _avg_tangent(geo, t):
    res = tsum(*_window_slices(geo, t))
    res = res / (geo.div if isinstance(geo.div, float) else const(t, geo.div))
    return res[0] if geo.unbatched else res


def _transpose(ctx, tangent, like, grad):
    """The vjp of an op linear in its input (here, for fixed maxima) from its tangent map: the gradient
    of <tangent(t), grad> with respect to t (``like``: an array of the input's shape and dtype)."""
    t = const(grad, grad.device.xp.zeros(like.shape, like.dtype))
    t.requires_grad = True
    return ctx.partials(tangent, (t,), grad, (True,))[0]


def pool_args(op, nd, kernel_size, stride, padding, dilation=1):
    """kernel, stride (default: the kernel), padding and dilation as tuples of ``nd`` ints."""
    kernel = ntuple(op, "kernel_size", kernel_size, nd, 1)
    stride = kernel if stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0) \
        else ntuple(op, "stride", stride, nd, 1)
    return kernel, stride, ntuple(op, "padding", padding, nd, 0), ntuple(op, "dilation", dilation, nd, 1)


@outside_apply
def _max_pool(cls, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    op, nd = cls.name, cls.nd
    kernel, stride, pads, dilation = pool_args(op, nd, kernel_size, stride, padding, dilation)
    _check_pool(op, nd, input, kernel, stride, pads, dilation, bool(ceil_mode))
    sink = [] if return_indices else None
    out = cls.apply(input, kernel=kernel, stride=stride, pads=pads, dilation=dilation, ceil_mode=bool(ceil_mode),
                    indices_sink=sink)
    return (out, wrap(sink[0], input.device)) if return_indices else out


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    return _max_pool(MaxPool1d, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """Max over (possibly overlapping) windows; stride defaults to kernel_size; padding counts as -inf.

    With return_indices=True also returns int64 indices into each flattened input plane (as PyTorch)."""
    return _max_pool(MaxPool2d, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def _avg_pool(cls, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    op, nd = cls.name, cls.nd
    kernel, stride, pads, dilation = pool_args(op, nd, kernel_size, stride, padding)
    if divisor_override is not None and (isinstance(divisor_override, bool) or
                                         not isinstance(divisor_override, int) or divisor_override == 0):
        raise ArgumentError(f"{op}: divisor_override must be a non-zero int, got {divisor_override!r}")
    _check_pool(op, nd, input, kernel, stride, pads, dilation, bool(ceil_mode))
    return cls.apply(input, kernel=kernel, stride=stride, pads=pads, ceil_mode=bool(ceil_mode),
                     count_include_pad=bool(count_include_pad), divisor_override=divisor_override)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    return _avg_pool(AvgPool1d, input, kernel_size, stride, padding, ceil_mode, count_include_pad, None)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """Mean over windows; padded zeros count in the divisor unless count_include_pad=False."""
    return _avg_pool(AvgPool2d, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


def _adaptive_size(output_size):
    sizes = tuple(output_size) if isinstance(output_size, (tuple, list)) else (output_size, output_size)
    if len(sizes) != 2 or not all(s is None or (isinstance(s, int) and not isinstance(s, bool) and s >= 1)
                                  for s in sizes):
        raise ArgumentError(f"adaptive_avg_pool2d: output_size must be a positive int or a pair of positive "
                            f"ints/None, got {output_size!r}")
    return sizes


def adaptive_avg_pool2d(input, output_size):
    """Average-pool (N, C, H, W) to ``output_size`` (int, pair, None keeps a dim); any sizes, PyTorch's bins."""
    sizes = _adaptive_size(output_size)
    if input.ndim not in (3, 4):
        raise ShapeError(f"adaptive_avg_pool2d: expected a 4-D (N, C, H, W) or 3-D (C, H, W) input, "
                         f"got shape {tuple(input.shape)}")
    if 0 in input.shape[-2:]:
        raise ShapeError(f"adaptive_avg_pool2d: input spatial size {tuple(input.shape[-2:])} must be non-empty")
    return AdaptiveAvgPool2d.apply(input, output_size=sizes)
