"""conv1d / conv2d: im2col (a strided view, one gather copy) + one GEMM per group; col2im for backward.

Shapes as in PyTorch: input (N, C, *spatial) (or unbatched (C, *spatial)), weight (O, C // groups, *k),
bias (O,). With G groups, Cg = C // G input channels and Og = O // G output channels per group, K the
kernel volume and L the number of output positions:

    cols = windows of padded x gathered once into (G, N*L, Cg*K)   im2col: a view, one copy
           [| 1]  plus a column of ones when there is a bias
    out  = cols @ [W | b]^T  -> (N*L, O): channels-last memory       one GEMM per group, bias included
    [dW | db] = g^T @ cols                                            cols saved: no second im2col
    dx   = col2im(g @ W_k) for each kernel offset k                   one GEMM and one strided add per offset

Memory layout (a deliberate difference from PyTorch's default): the GEMM produces (N*L, O), i.e. memory
ordered (N, *out, C) -- "channels last". Returning it as an (N, O, *out) *view* of that memory saves a
transposing copy of every activation, and the next layers (ReLU, pooling, the next conv's im2col, which
then gathers runs of contiguous channels) follow the layout (backend/layout.py). Shapes and values are
exactly PyTorch's; only ``.array.strides`` differ, as with PyTorch's ``memory_format=torch.channels_last``.
"""
import itertools
import math

from ...autograd.function import Function
from ...backend.gemm import matmul
from ...backend.layout import is_channels_last
from ...errors import ArgumentError, ShapeError
from .._rules import tsum
from ._util import channel_sum, check_same_dtype, kernel_slices, ntuple, pad_spatial, windows


def conv_padding(op, padding, kernel, stride, dilation, nd):
    """int / tuple / 'valid' / 'same' -> ((left, right), ...) per spatial dim (PyTorch's 'same' puts the
    odd extra element on the right)."""
    if isinstance(padding, str):
        if padding == "valid":
            return ((0, 0),) * nd
        if padding == "same":
            if any(s != 1 for s in stride):
                raise ArgumentError(f"{op}: padding='same' is not supported for strided convolutions "
                                    f"(stride={stride})")
            pads = []
            for k, d in zip(kernel, dilation):
                total = d * (k - 1)
                pads.append((total // 2, total - total // 2))
            return tuple(pads)
        raise ArgumentError(f"{op}: padding must be an int, a tuple, 'same' or 'valid', got {padding!r}")
    return tuple((p, p) for p in ntuple(op, "padding", padding, nd, 0))


def _im2col(ctx, x, ones):
    """x (N, C, *sp) -> cols (G, N*L, Kg), Kg = Cg*K, gathered in one copy in the order x's memory favours:
    channels-last x -> rows ordered (kernel offset, channel) ('kc', runs of contiguous channels);
    channels-first x -> a (G, Kg, N*L) array ordered (channel, offset) ('ck'), returned transposed.
    ``ones``: append a column of ones (Kg + 1 columns), the input that the bias multiplies."""
    nd, G = ctx.nd, ctx.groups
    win = windows(ctx.xp, pad_spatial(ctx, x, ctx.pads), ctx.kernel, ctx.stride, ctx.dilation)    # N, C, *out, *k
    N, C = x.shape[:2]
    win = win.reshape((N, G, C // G) + win.shape[2:])                           # N, G, Cg, *out, *k
    outs, ks = tuple(range(3, 3 + nd)), tuple(range(3 + nd, 3 + 2 * nd))
    NL, Kg = N * math.prod(ctx.out), C // G * math.prod(ctx.kernel)
    if ctx.kc:
        win = win.transpose((1, 0) + outs + ks + (2,))                          # G, N, *out, *k, Cg
        cols = ctx.empty((G, NL, Kg + ones), x.dtype)
        cols[:, :, :Kg].reshape(win.shape)[...] = win
    else:
        win = win.transpose((1, 2) + ks + (0,) + outs)                          # G, Cg, *k, N, *out
        cols = ctx.empty((G, Kg + ones, NL), x.dtype).swapaxes(1, 2)
        cols[:, :, :Kg].swapaxes(1, 2).reshape(win.shape)[...] = win
    if ones:
        cols[:, :, Kg] = 1
    return cols


def _weight_matrix(xp, weight, bias, G, kc):
    """(O, Cg, *k) -> (G, Og, Kg) with Kg ordered like the columns ('kc' moves channels innermost); the
    bias, if any, as one more column: out = cols @ W^T then adds it for free inside the GEMM."""
    O, Cg = weight.shape[:2]
    w = weight.reshape(G, O // G, Cg, -1)
    if kc:
        w = w.swapaxes(2, 3)
    w = w.reshape(G, O // G, -1)
    if bias is None:
        return w
    return xp.concatenate([w, bias.reshape(G, O // G, 1)], axis=2)


class _ConvNd(Function):
    nd = 0

    @staticmethod
    def forward(ctx, x, weight, bias, *, stride, pads, dilation, groups):
        check_same_dtype(ctx.name, x, weight, bias)
        xp = ctx.xp
        ctx.unbatched, x_in = x.ndim == ctx.nd + 1, x
        if ctx.unbatched:
            x = x[None]
        N, O = x.shape[0], weight.shape[0]
        kernel = tuple(weight.shape[2:])
        padded = tuple(s + lo + hi for s, (lo, hi) in zip(x.shape[2:], pads))
        eff = tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilation))
        ctx.kernel, ctx.stride, ctx.dilation, ctx.pads, ctx.groups = kernel, stride, dilation, pads, groups
        ctx.out = out = tuple((p - e) // s + 1 for p, e, s in zip(padded, eff, stride))
        ctx.x_shape = x.shape
        ctx.kc = is_channels_last(x)
        G, Og, NL = groups, O // groups, N * math.prod(out)

        has_bias = bias is not None
        cols = _im2col(ctx, x, has_bias)                            # (G, N*L, Kg [+ 1 ones column])
        w = _weight_matrix(xp, weight, bias, G, ctx.kc)             # (G, Og, Kg [+ 1 bias column])
        y = matmul(xp, cols, w.swapaxes(1, 2), out=ctx.empty((G, NL, Og), x.dtype))
        if G == 1:
            y = y.reshape((N,) + out + (O,))
        else:   # interleave the groups' channels: (G, N*L, Og) -> (N*L, G, Og)
            yg, y = y, ctx.empty((N,) + out + (O,), x.dtype)
            y.reshape(NL, G, Og)[...] = yg.swapaxes(0, 1)
        y = xp.moveaxis(y, -1, 1)                       # (N, O, *out): a view of channels-last memory
        # the columns, not x, are what dW needs: saved, they spare backward a second im2col. x is kept for
        # the second derivative (vjp), usually at no cost (the previous ReLU or pool saved it too): itself
        # when it requires grad (then changing it in place is refused, as PyTorch does), else a view (the
        # first-order gradients, which read the columns, stay right if it changes in place)
        ctx.save_for_backward(weight, cols if ctx.needs_input_grad[1] else None,
                              x_in if ctx.needs_input_grad[0] else x_in[...])
        return y[0] if ctx.unbatched else y

    @staticmethod
    def backward(ctx, grad):
        weight, cols, _ = ctx.saved_tensors
        if ctx.unbatched:
            grad = grad[None]
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        dx = _input_grad(ctx, grad, weight) if need_x else None
        dw = db = None
        if need_w:
            dw, db = _weight_grad(ctx, grad, cols, weight.shape)
        if need_b and db is None:
            db = channel_sum(ctx.xp, grad)
        return (dx[0] if ctx.unbatched and dx is not None else dx), dw, db

    # Beyond first order: conv is bilinear, and so are its two gradients, each an op of its own whose
    # gradients are the other two (dx = ConvInputGrad(g, w), dw = ConvWeightGrad(x, g)): any order.
    @staticmethod
    def vjp(ctx, grad):
        weight, x = ctx.saved_tensors[0], ctx.saved_tensors[2]
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        geo = _Geometry(ctx)
        return (ConvInputGrad.apply(grad, weight, geo=geo) if need_x else None,
                ConvWeightGrad.apply(x, grad, geo=geo) if need_w else None,
                grad.sum(dim=(0,) + tuple(range(2, grad.ndim))) if need_b and grad.ndim > ctx.nd + 1 else
                grad.sum(dim=tuple(range(1, grad.ndim))) if need_b else None)

    @classmethod
    def jvp(cls, primals, tangents, out, **options):
        (x, w, b), (tx, tw, tb) = primals, tangents
        shape = (-1,) + (1,) * cls.nd
        return tsum(None if tx is None else cls.apply(tx, w, None, **options),
                    None if tw is None else cls.apply(x, tw, None, **options),
                    None if tb is None else tb.reshape(shape))


def _input_grad(ctx, grad, weight):
    """dx = col2im(g @ W_k) for batched ``grad`` (N, O, *out): one GEMM and one strided add per offset."""
    xp, nd, G = ctx.xp, ctx.nd, ctx.groups
    N, C = ctx.x_shape[:2]
    O, Cg = weight.shape[:2]
    Og, NL = O // G, N * math.prod(ctx.out)
    gmt = xp.moveaxis(grad, 1, -1).reshape(NL, G, Og).swapaxes(0, 1)   # (G, N*L, Og)
    K = math.prod(ctx.kernel)
    wk = xp.ascontiguousarray(weight.reshape(G, Og, Cg, K).transpose(0, 3, 1, 2))   # (G, K, Og, Cg)
    padded = tuple(s + lo + hi for s, (lo, hi) in zip(ctx.x_shape[2:], ctx.pads))
    # col2im in channels-last memory (N, *padded, G, Cg): each offset adds runs of channels
    dxp = ctx.empty((N,) + padded + (G, Cg), weight.dtype)
    dxp.fill(0)
    src_axes = (1,) + tuple(range(2, 2 + nd)) + (0, 2 + nd)            # -> N, *out, G, Cg
    for k, offs in enumerate(itertools.product(*(range(n) for n in ctx.kernel))):
        sl = kernel_slices(offs, ctx.out, ctx.stride, ctx.dilation)
        dcols = matmul(xp, gmt, wk[:, k])          # (G, N*L, Cg): one offset's GEMM at a time, not K at once
        dxp[(slice(None),) + sl] += dcols.reshape((G, N) + ctx.out + (Cg,)).transpose(src_axes)
    crop = tuple(slice(lo, lo + s) for s, (lo, _) in zip(ctx.x_shape[2:], ctx.pads))
    return xp.moveaxis(dxp[(slice(None),) + crop].reshape((N,) + ctx.x_shape[2:] + (C,)), -1, 1)


def _weight_grad(ctx, grad, cols, weight_shape):
    """(dW, db or None) = g^T @ cols for batched ``grad``; db comes from the ones column when cols has it."""
    xp, G = ctx.xp, ctx.groups
    O, Cg = weight_shape[:2]
    Og, NL = O // G, grad.shape[0] * math.prod(ctx.out)
    gmt = xp.moveaxis(grad, 1, -1).reshape(NL, G, Og).swapaxes(0, 1)   # a view when grad is channels-last
    dw = matmul(xp, gmt.swapaxes(1, 2), cols)      # (G, Og, Kg [+ 1])
    Kg, db = Cg * math.prod(ctx.kernel), None
    if dw.shape[2] > Kg:                            # the ones column: its weight is the bias
        db, dw = dw[:, :, Kg].reshape(O), dw[:, :, :Kg]
    if ctx.kc:                                      # (kernel offset, channel) -> weight's order
        dw = dw.reshape(G, Og, -1, Cg).swapaxes(2, 3)
    return dw.reshape(weight_shape), db


class _Geometry:
    """A convolution's geometry, handed from its node to the two gradient ops (which recompute with it)."""
    FIELDS = ("nd", "kernel", "stride", "dilation", "pads", "groups", "out", "x_shape", "kc", "unbatched")

    def __init__(self, ctx):
        for name in self.FIELDS:
            setattr(self, name, getattr(ctx, name))


def _adopt(ctx, geo):
    for name in _Geometry.FIELDS:
        setattr(ctx, name, getattr(geo, name))
    ctx.geo = geo


class ConvInputGrad(Function):
    """dx of a convolution, ``(g, w) -> conv's input gradient``: bilinear, with gradients
    d/dg = conv(h, w) and d/dw = ConvWeightGrad(h, g) for an incoming ``h``."""
    name = "conv_input_grad"

    @staticmethod
    def forward(ctx, grad, weight, *, geo):
        _adopt(ctx, geo)
        ctx.save_for_backward(grad, weight)
        dx = _input_grad(ctx, grad[None] if geo.unbatched else grad, weight)
        return dx[0] if geo.unbatched else dx

    @staticmethod
    def backward(ctx, h):
        g, w = ctx.saved_tensors
        hb, gb = (h[None], g[None]) if ctx.unbatched else (h, g)
        cols = _im2col(ctx, hb, False)
        dg = _conv_cols(ctx, cols, w)
        dw = _weight_grad(ctx, gb, cols, w.shape)[0] if ctx.needs_input_grad[1] else None
        return (dg[0] if ctx.unbatched else dg) if ctx.needs_input_grad[0] else None, dw

    @staticmethod
    def vjp(ctx, h):
        g, w = ctx.saved_tensors
        conv = _CONVS[ctx.nd]
        return (conv.apply(h, w, None, stride=ctx.stride, pads=ctx.pads, dilation=ctx.dilation,
                           groups=ctx.groups) if ctx.needs_input_grad[0] else None,
                ConvWeightGrad.apply(h, g, geo=ctx.geo) if ctx.needs_input_grad[1] else None)

    @staticmethod
    def jvp(primals, tangents, out, geo):
        (g, w), (tg, tw) = primals, tangents
        return tsum(None if tg is None else ConvInputGrad.apply(tg, w, geo=geo),
                    None if tw is None else ConvInputGrad.apply(g, tw, geo=geo))


class ConvWeightGrad(Function):
    """dW of a convolution, ``(x, g) -> conv's weight gradient``: bilinear, with gradients
    d/dx = ConvInputGrad(g, h) and d/dg = conv(x, h) for an incoming ``h``."""
    name = "conv_weight_grad"

    @staticmethod
    def forward(ctx, x, grad, *, geo):
        _adopt(ctx, geo)
        xb, gb = (x[None], grad[None]) if geo.unbatched else (x, grad)
        ctx.kc = is_channels_last(xb)
        O = gb.shape[1]
        ctx.save_for_backward(x, grad)
        ctx.weight_shape = (O, xb.shape[1] // geo.groups) + tuple(geo.kernel)
        return _weight_grad(ctx, gb, _im2col(ctx, xb, False), ctx.weight_shape)[0]

    @staticmethod
    def backward(ctx, h):
        x, g = ctx.saved_tensors
        xb, gb = (x[None], g[None]) if ctx.unbatched else (x, g)
        dx = _input_grad(ctx, gb, h) if ctx.needs_input_grad[0] else None
        dg = None
        if ctx.needs_input_grad[1]:
            dg = _conv_cols(ctx, _im2col(ctx, xb, False), h)
        return ((dx[0] if ctx.unbatched else dx) if dx is not None else None,
                (dg[0] if ctx.unbatched else dg) if dg is not None else None)

    @staticmethod
    def vjp(ctx, h):
        x, g = ctx.saved_tensors
        conv = _CONVS[ctx.nd]
        return (ConvInputGrad.apply(g, h, geo=ctx.geo) if ctx.needs_input_grad[0] else None,
                conv.apply(x, h, None, stride=ctx.stride, pads=ctx.pads, dilation=ctx.dilation,
                           groups=ctx.groups) if ctx.needs_input_grad[1] else None)

    @staticmethod
    def jvp(primals, tangents, out, geo):
        (x, g), (tx, tg) = primals, tangents
        return tsum(None if tx is None else ConvWeightGrad.apply(tx, g, geo=geo),
                    None if tg is None else ConvWeightGrad.apply(x, tg, geo=geo))


def _conv_cols(ctx, cols, weight):
    """The convolution of the input ``cols`` (im2col'd, without bias) with ``weight``: (N, O, *out)."""
    y = matmul(ctx.xp, cols, _weight_matrix(ctx.xp, weight, None, ctx.groups, ctx.kc).swapaxes(1, 2))
    N, O = y.shape[1] // math.prod(ctx.out), weight.shape[0]
    return ctx.xp.moveaxis(y.swapaxes(0, 1).reshape((N,) + ctx.out + (O,)), -1, 1)


class Conv1d(_ConvNd):
    name = "conv1d"
    nd = 1


class Conv2d(_ConvNd):
    name = "conv2d"
    nd = 2


_CONVS = {1: Conv1d, 2: Conv2d}


def check_groups(op, groups):
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ArgumentError(f"{op}: groups must be a positive int, got {groups!r}")


def _check_conv(op, nd, x, weight, bias, pads, dilation, groups):
    if weight.ndim != nd + 2:
        raise ShapeError(f"{op}: weight must be {nd + 2}-D (out_channels, in_channels/groups, "
                         f"*kernel_size), got shape {tuple(weight.shape)}")
    if x.ndim not in (nd + 1, nd + 2):
        raise ShapeError(f"{op}: expected a {nd + 2}-D (batched) or {nd + 1}-D (unbatched) input, "
                         f"got shape {tuple(x.shape)}")
    C, spatial = x.shape[-nd - 1], x.shape[-nd:]
    O, Cg = weight.shape[:2]
    if O % groups:
        raise ArgumentError(f"{op}: out_channels={O} (weight shape {tuple(weight.shape)}) is not "
                            f"divisible by groups={groups}")
    if C != Cg * groups:
        raise ShapeError(f"{op}: input has {C} channels but weight expects {Cg * groups} "
                         f"(weight shape {tuple(weight.shape)}, groups={groups})")
    if bias is not None and tuple(bias.shape) != (O,):
        raise ShapeError(f"{op}: bias shape {tuple(bias.shape)} does not match out_channels={O}")
    padded = tuple(s + lo + hi for s, (lo, hi) in zip(spatial, pads))
    eff = tuple(d * (k - 1) + 1 for k, d in zip(weight.shape[2:], dilation))
    if any(p < e for p, e in zip(padded, eff)):
        raise ShapeError(f"{op}: input spatial size {tuple(spatial)} (padded {padded}) is smaller than "
                         f"the dilated kernel size {eff} (weight shape {tuple(weight.shape)}, "
                         f"dilation={tuple(dilation)})")


def _conv(cls, input, weight, bias, stride, padding, dilation, groups):
    op, nd = cls.name, cls.nd
    check_groups(op, groups)
    stride = ntuple(op, "stride", stride, nd, 1)
    dilation = ntuple(op, "dilation", dilation, nd, 1)
    kernel = tuple(weight.shape[2:]) if weight.ndim == nd + 2 else (1,) * nd
    pads = conv_padding(op, padding, kernel, stride, dilation, nd)
    _check_conv(op, nd, input, weight, bias, pads, dilation, groups)
    return cls.apply(input, weight, bias, stride=stride, pads=pads, dilation=dilation, groups=groups)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution (cross-correlation, as PyTorch): input (N, C, L), weight (O, C/groups, k).

    padding: int, tuple, 'valid' or 'same' (stride 1 only)."""
    return _conv(Conv1d, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution: input (N, C, H, W), weight (O, C/groups, kh, kw); im2col + one GEMM per group."""
    return _conv(Conv2d, input, weight, bias, stride, padding, dilation, groups)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """2-D transposed convolution ("deconvolution"): input (N, C_in, H, W), weight (C_in, C_out/groups, kh, kw).

    It is conv2d's gradient with respect to its input, so it runs as ``ConvInputGrad`` (the op conv2d's
    backward uses) with input playing the output gradient of a conv2d from C_out to C_in channels whose
    input size is H_out = (H - 1) stride - 2 padding + dilation (kh - 1) + output_padding + 1; its own
    gradients are conv2d (input) and ``ConvWeightGrad`` (weight), at any order."""
    op = "conv_transpose2d"
    check_groups(op, groups)
    stride, dilation = ntuple(op, "stride", stride, 2, 1), ntuple(op, "dilation", dilation, 2, 1)
    padding, out_pad = ntuple(op, "padding", padding, 2, 0), ntuple(op, "output_padding", output_padding, 2, 0)
    if weight.ndim != 4:
        raise ShapeError(f"{op}: weight must be 4-D (in_channels, out_channels/groups, kh, kw), got shape "
                         f"{tuple(weight.shape)}")
    if input.ndim not in (3, 4):
        raise ShapeError(f"{op}: expected a 4-D (batched) or 3-D (unbatched) input, got shape {tuple(input.shape)}")
    if any(o >= max(s, d) for o, s, d in zip(out_pad, stride, dilation)):
        raise ArgumentError(f"{op}: output_padding {out_pad} must be smaller than stride {stride} or dilation "
                            f"{dilation}")
    C_in, spatial = input.shape[-3], tuple(input.shape[-2:])
    if weight.shape[0] != C_in or C_in % groups:
        raise ShapeError(f"{op}: input has {C_in} channels but weight (shape {tuple(weight.shape)}) expects "
                         f"{weight.shape[0]}, divisible by groups={groups}")
    kernel = tuple(weight.shape[2:])
    size = tuple((h - 1) * s - 2 * p + d * (k - 1) + o + 1
                 for h, s, p, d, k, o in zip(spatial, stride, padding, dilation, kernel, out_pad))
    if any(n < 1 for n in size):
        raise ShapeError(f"{op}: the output size {size} is not positive (input {tuple(input.shape)}, weight "
                         f"{tuple(weight.shape)}, stride {stride}, padding {padding})")
    C_out = weight.shape[1] * groups
    if bias is not None and tuple(bias.shape) != (C_out,):
        raise ShapeError(f"{op}: bias shape {tuple(bias.shape)} does not match out_channels={C_out}")
    geo = _Geometry.__new__(_Geometry)
    geo.nd, geo.kernel, geo.stride, geo.dilation, geo.groups = 2, kernel, stride, dilation, groups
    geo.pads, geo.out, geo.kc, geo.unbatched = tuple((p, p) for p in padding), spatial, False, input.ndim == 3
    geo.x_shape = ((1 if geo.unbatched else input.shape[0]), C_out) + size
    out = ConvInputGrad.apply(input, weight, geo=geo)
    return out if bias is None else out + bias.reshape(-1, 1, 1)
