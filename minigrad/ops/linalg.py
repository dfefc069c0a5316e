"""Matrix multiplication: 1-D, 2-D, batched, with broadcast batch dims (NumPy/PyTorch matmul rules)."""
from ..autograd.function import Function
from ..backend.gemm import matmul


def _mT(x):
    return x.swapaxes(-1, -2)


class MatMul(Function):
    name = "matmul"

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return matmul(ctx.xp, a, b)

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
            ga = matmul(ctx.xp, g, _mT(b2))
            if a_vec:
                ga = ga.reshape(-1, a.shape[0]).sum(0) if ga.ndim > 2 else ga[0]
        if need_b:
            if b2.ndim == 2 and a2.ndim > 2:
                # (…, n, k) @ (k, m): fold the batch into one GEMM instead of summing per batch
                k, m = b2.shape
                gb = matmul(ctx.xp, a2.reshape(-1, k).T, g.reshape(-1, m))
            else:
                gb = matmul(ctx.xp, _mT(a2), g)
            if b_vec:
                gb = gb[..., 0]
        return ga, gb
