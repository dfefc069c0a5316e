"""linear: y = x @ W.T + b as one Function, two GEMMs in backward.

``x`` may have any leading dims; it is viewed as 2-D (M, in) so each product is a single BLAS call.
``W.T`` is a transposed view, which BLAS reads without a copy.
"""
import functools

from ...autograd.function import Function
from ...backend.gemm import matmul
from ...errors import ShapeError
from .._rules import tsum
from ._util import check_same_dtype


class Linear(Function):
    name = "linear"

    @staticmethod
    def forward(ctx, x, weight, bias):
        check_same_dtype("linear", x, weight, bias)
        out_f, in_f = weight.shape
        ctx.save_for_backward(x, weight)
        x2 = x.reshape(-1, in_f)
        y = matmul(ctx.xp, x2, weight.T, out=ctx.empty((x2.shape[0], out_f), x.dtype))  # born in the pool
        if bias is not None:
            y += bias
        return y.reshape(x.shape[:-1] + (out_f,))

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        out_f, in_f = weight.shape
        g2 = grad.reshape(-1, out_f)
        need_x, need_w, need_b = ctx.needs_input_grad
        mm, dt = functools.partial(matmul, ctx.xp), grad.dtype
        dx = mm(g2, weight, out=ctx.empty((g2.shape[0], in_f), dt)).reshape(x.shape) if need_x else None
        dw = mm(g2.T, x.reshape(-1, in_f), out=ctx.empty((out_f, in_f), dt)) if need_w else None
        db = g2.sum(axis=0, out=ctx.empty((out_f,), dt)) if need_b else None
        return dx, dw, db

    @staticmethod
    def vjp(ctx, grad):
        x, weight = ctx.saved_tensors
        out_f, in_f = weight.shape
        g2 = grad.reshape(-1, out_f)
        need_x, need_w, need_b = ctx.needs_input_grad
        dx = (g2 @ weight).reshape(x.shape) if need_x else None
        dw = g2.transpose(0, 1) @ x.reshape(-1, in_f) if need_w else None
        return dx, dw, g2.sum(dim=0) if need_b else None

    @staticmethod
    def jvp(primals, tangents, out):
        (x, w, _), (tx, tw, tb) = primals, tangents
        return tsum(None if tx is None else Linear.apply(tx, w, None),
                    None if tw is None else Linear.apply(x, tw, None), tb)


def _check_linear(x, weight, bias):
    if weight.ndim != 2:
        raise ShapeError(f"linear: weight must be 2-D (out_features, in_features), got shape "
                         f"{tuple(weight.shape)}")
    out_f, in_f = weight.shape
    if x.ndim == 0 or x.shape[-1] != in_f:
        raise ShapeError(f"linear: input shape {tuple(x.shape)} has "
                         f"{x.shape[-1] if x.ndim else 'no'} features in its last dim but weight "
                         f"(shape {tuple(weight.shape)}) expects {in_f}")
    if bias is not None and tuple(bias.shape) not in ((out_f,), ()):
        raise ShapeError(f"linear: bias shape {tuple(bias.shape)} does not match out_features={out_f} "
                         f"(weight shape {tuple(weight.shape)})")


def linear(input, weight, bias=None):
    """y = x @ weight.T + bias, weight of shape (out_features, in_features); any leading dims."""
    _check_linear(input, weight, bias)
    return Linear.apply(input, weight, bias)
