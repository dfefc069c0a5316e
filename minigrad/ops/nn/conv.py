"""conv1d / conv2d: im2col (a strided view, one gather copy) + one GEMM per group; col2im for backward.

Shapes as in PyTorch: input (N, C, *spatial) (or unbatched (C, *spatial)), weight (O, C // groups, *k),
bias (O,). With G groups, Cg = C // G input channels and Og = O // G output channels per group, K the
kernel volume and L the number of output positions:

    cols = windows of padded x arranged (G, Cg*K, N*L)      im2col: a view, copied once by reshape
    out  = W (G, Og, Cg*K) @ cols -> (N, O, *out)          one GEMM per group
    dW   = g (G, Og, N*L) @ cols^T                           cols recomputed: only x is saved
    dcols = W^T @ g  then col2im: for each kernel offset, a strided slice of dx += its columns
"""
import itertools

from ...autograd.function import Function
from ...errors import ArgumentError, DTypeError, ShapeError
from ._util import kernel_slices, ntuple, windows


def _prod(xs):
    n = 1
    for v in xs:
        n *= v
    return n


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


def _pad(xp, x, pads):
    if not any(lo or hi for lo, hi in pads):
        return x
    return xp.pad(x, ((0, 0), (0, 0)) + tuple(pads))


def _im2col(ctx, x):
    """x (N, C, *sp) -> cols (G, Cg*K, N*L), a fresh contiguous array."""
    nd = ctx.nd
    win = windows(ctx.xp, _pad(ctx.xp, x, ctx.pads), ctx.kernel, ctx.stride, ctx.dilation)
    # win axes: N, C, *out, *k  ->  C, *k, N, *out
    perm = (1,) + tuple(range(2 + nd, 2 + 2 * nd)) + (0,) + tuple(range(2, 2 + nd))
    G = ctx.groups
    return win.transpose(perm).reshape(G, -1, x.shape[0] * _prod(ctx.out))


class _ConvNd(Function):
    nd = 0

    @staticmethod
    def forward(ctx, x, weight, bias, stride, pads, dilation, groups):
        xp, nd, op = ctx.xp, ctx.nd, ctx.name
        if weight.ndim != nd + 2:
            raise ShapeError(f"{op}: weight must be {nd + 2}-D (out_channels, in_channels/groups, "
                             f"*kernel_size), got shape {tuple(weight.shape)}")
        x_in = x
        ctx.unbatched = x.ndim == nd + 1
        if ctx.unbatched:
            x = x[None]
        if x.ndim != nd + 2:
            raise ShapeError(f"{op}: expected a {nd + 2}-D (batched) or {nd + 1}-D (unbatched) input, "
                             f"got shape {tuple(x.shape) if not ctx.unbatched else tuple(x.shape[1:])}")
        if x.dtype != weight.dtype or (bias is not None and bias.dtype != weight.dtype):
            raise DTypeError(f"{op}: input ({x.dtype}), weight ({weight.dtype})"
                             + ("" if bias is None else f" and bias ({bias.dtype})") + " must share a dtype")
        N, C = x.shape[:2]
        O, Cg = weight.shape[:2]
        kernel = tuple(weight.shape[2:])
        if O % groups:
            raise ArgumentError(f"{op}: out_channels={O} (weight shape {tuple(weight.shape)}) is not "
                                f"divisible by groups={groups}")
        if C != Cg * groups:
            raise ShapeError(f"{op}: input has {C} channels but weight expects {Cg * groups} "
                             f"(weight shape {tuple(weight.shape)}, groups={groups})")
        if bias is not None and tuple(bias.shape) != (O,):
            raise ShapeError(f"{op}: bias shape {tuple(bias.shape)} does not match out_channels={O}")
        spatial = x.shape[2:]
        padded = tuple(s + lo + hi for s, (lo, hi) in zip(spatial, pads))
        eff = tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilation))
        if any(p < e for p, e in zip(padded, eff)):
            raise ShapeError(f"{op}: input spatial size {tuple(spatial)} (padded {padded}) is smaller than "
                             f"the dilated kernel size {eff} (weight shape {tuple(weight.shape)}, "
                             f"dilation={tuple(dilation)})")
        ctx.kernel, ctx.stride, ctx.dilation, ctx.pads, ctx.groups = kernel, stride, dilation, pads, groups
        ctx.out = out = tuple((p - e) // s + 1 for p, e, s in zip(padded, eff, stride))
        ctx.has_bias = bias is not None

        cols = _im2col(ctx, x)                                   # (G, Cg*K, N*L)
        y = weight.reshape(groups, O // groups, -1) @ cols       # (G, Og, N*L): one GEMM per group
        y = y.reshape((O, N) + out).swapaxes(0, 1)               # (N, O, *out), a view ...
        y = xp.ascontiguousarray(y)                              # ... made contiguous once
        if bias is not None:
            y += bias.reshape((O,) + (1,) * nd)
        # keep the columns for dW when the weight needs a gradient (memory for speed: no second im2col)
        ctx.save_for_backward(x_in, weight, cols if ctx.needs_input_grad[1] else None)
        return y[0] if ctx.unbatched else y

    @staticmethod
    def backward(ctx, grad):
        xp, nd, G = ctx.xp, ctx.nd, ctx.groups
        x, weight, cols = ctx.saved_tensors
        if ctx.unbatched:
            x, grad = x[None], grad[None]
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        N, O = grad.shape[:2]
        Og, L = O // G, _prod(ctx.out)
        gm = xp.ascontiguousarray(grad.reshape(N, O, L).swapaxes(0, 1)).reshape(G, Og, N * L)
        dx = dw = db = None
        if need_w:
            cols = _im2col(ctx, x) if cols is None else cols
            dw = (gm @ cols.swapaxes(1, 2)).reshape(weight.shape)
        if need_b:
            db = grad.sum(axis=(0,) + tuple(range(2, 2 + nd)))
        if need_x:
            C = x.shape[1]
            dcols = weight.reshape(G, Og, -1).swapaxes(1, 2) @ gm          # (G, Cg*K, N*L)
            dcols = dcols.reshape((C,) + ctx.kernel + (N,) + ctx.out)
            padded = tuple(s + lo + hi for s, (lo, hi) in zip(x.shape[2:], ctx.pads))
            # col2im, accumulated channel-major (C, N, ...) like dcols so each kernel offset adds a
            # contiguous block; the (N, C, ...) result is a transposed view of it
            dxp = xp.zeros((C, N) + padded, dtype=x.dtype)
            for offs in itertools.product(*(range(k) for k in ctx.kernel)):
                sl = kernel_slices(offs, ctx.out, ctx.stride, ctx.dilation)
                dxp[(slice(None), slice(None)) + sl] += dcols[(slice(None),) + offs]
            crop = tuple(slice(lo, lo + s) for s, (lo, _) in zip(x.shape[2:], ctx.pads))
            dx = dxp[(slice(None), slice(None)) + crop].swapaxes(0, 1)
            if ctx.unbatched:
                dx = dx[0]
        return dx, dw, db, None, None, None, None


class Conv1d(_ConvNd):
    name = "conv1d"
    nd = 1


class Conv2d(_ConvNd):
    name = "conv2d"
    nd = 2


def conv_nd(cls, input, weight, bias, stride, padding, dilation, groups):
    op, nd = cls.name, cls.nd
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ArgumentError(f"{op}: groups must be a positive int, got {groups!r}")
    stride = ntuple(op, "stride", stride, nd, 1)
    dilation = ntuple(op, "dilation", dilation, nd, 1)
    kernel = tuple(weight.shape[2:]) if weight.ndim == nd + 2 else (1,) * nd
    pads = conv_padding(op, padding, kernel, stride, dilation, nd)
    return cls.apply(input, weight, bias, stride, pads, dilation, groups)
