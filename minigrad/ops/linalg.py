"""Matrix multiplication: 1-D, 2-D, batched, with broadcast batch dims (NumPy/PyTorch matmul rules)."""
import numpy as np  # shape arithmetic only

from ..autograd.function import Function
from ..errors import ShapeError
from ..tensor_base import TensorBase as Tensor  # every Tensor is one (tensor.py imports ops)
from ._args import as_tensor_like
from ._rules import tsum
from ..backend import gemm


def _mT(x):
    return x.swapaxes(-1, -2)


class MatMul(Function):
    name = "matmul"

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return gemm.matmul(ctx.xp, a, b)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        need_a, need_b = ctx.needs_input_grad
        a_vec, b_vec = a.ndim == 1, b.ndim == 1
        if a_vec and b_vec:  # dot product
            return (grad * b if need_a else None), (grad * a if need_b else None)
        # promote vectors to matrices so one set of formulas serves every case
        a2 = a[None, :] if a_vec else a
        b2 = b[:, None] if b_vec else b
        g = grad
        if a_vec:
            g = g[..., None, :]
        if b_vec:
            g = g[..., None]
        ga = gb = None
        if need_a:
            ga = gemm.matmul(ctx.xp, g, _mT(b2))
            if a_vec:
                ga = ga.reshape(-1, a.shape[0]).sum(0) if ga.ndim > 2 else ga[0]
        if need_b:
            if b2.ndim == 2 and a2.ndim > 2:
                # (…, n, k) @ (k, m): fold the batch into one GEMM instead of summing per batch
                k, m = b2.shape
                gb = gemm.matmul(ctx.xp, a2.reshape(-1, k).T, g.reshape(-1, m))
            else:
                gb = gemm.matmul(ctx.xp, _mT(a2), g)
            if b_vec:
                gb = gb[..., 0]
        return ga, gb

    @staticmethod
    def vjp(ctx, grad):
        a, b = ctx.saved_tensors
        need_a, need_b = ctx.needs_input_grad
        if a.ndim == 1 and b.ndim == 1:
            return (grad * b if need_a else None), (grad * a if need_b else None)
        a2 = a.unsqueeze(0) if a.ndim == 1 else a
        b2 = b.unsqueeze(-1) if b.ndim == 1 else b
        g = grad.unsqueeze(-2) if a.ndim == 1 else grad
        g = g.unsqueeze(-1) if b.ndim == 1 else g
        ga = matmul(g, _mT(b2)) if need_a else None     # batch dims: the engine sums them back
        gb = matmul(_mT(a2), g) if need_b else None
        if ga is not None and a.ndim == 1:
            ga = ga[..., 0, :]
        if gb is not None and b.ndim == 1:
            gb = gb[..., 0]
        return ga, gb

    @staticmethod
    def jvp(primals, tangents, out):
        (a, b), (ta, tb) = primals, tangents
        return tsum(None if ta is None else matmul(ta, b), None if tb is None else matmul(a, tb))


def matmul(a, b):
    if not isinstance(b, Tensor):
        b = as_tensor_like(b, a)
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(f"matmul: both arguments need at least 1 dimension, got shapes "
                         f"{tuple(a.shape)} and {tuple(b.shape)}")
    k_a = a.shape[-1]
    k_b = b.shape[0] if b.ndim == 1 else b.shape[-2]
    if k_a != k_b:
        raise ShapeError(f"matmul: shapes {tuple(a.shape)} and {tuple(b.shape)} are not aligned "
                         f"({k_a} != {k_b})")
    if a.ndim > 2 or b.ndim > 2:
        try:
            np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        except ValueError:
            raise ShapeError(f"matmul: batch dims of shapes {tuple(a.shape)} and {tuple(b.shape)} do not "
                             f"broadcast ({tuple(a.shape[:-2])} vs {tuple(b.shape[:-2])})") from None
    return MatMul.apply(a, b)


def _check_ndim(op, a, b, ndim):
    if a.ndim != ndim or b.ndim != ndim:
        raise ShapeError(f"{op}: expected {ndim}-D tensors, got shapes {tuple(a.shape)} and {tuple(b.shape)}")


def mm(a, b):
    _check_ndim("mm", a, b, 2)
    return matmul(a, b)


def bmm(a, b):
    _check_ndim("bmm", a, b, 3)
    return matmul(a, b)


class LinalgMethods:
    """Tensor's matrix products (``x @ w``): a mixin of ``Tensor``."""
    __slots__ = ()
    __matmul__ = matmul
    matmul, mm, bmm = matmul, mm, bmm

    def __rmatmul__(self, other):
        return matmul(as_tensor_like(other, self), self)
