"""scaled_dot_product_attention as one Function: softmax(q k^T * scale + mask) @ v, fused backward.

Masks follow PyTorch: a bool mask keeps the positions where it is True; a float mask is added to the scores;
``is_causal`` keeps the lower triangle of the (L, S) score matrix (top-left aligned).

Fully masked rows: PyTorch returns NaN there (0/0 in the softmax). minigrad returns zeros instead: such a
row attends to nothing, its output row is 0 and no gradient flows through it. This avoids NaNs poisoning a
whole batch through padding-only rows (e.g. an empty sequence in a padded batch).
"""
import math

import numpy as np  # shape arithmetic only

from ...autograd.function import Function
from ...backend.gemm import matmul
from ...errors import ArgumentError, DTypeError, ShapeError
from ...random import host_rng
from ...autograd.forward_ad import ForwardADError
from .._rules import composite_jvp, const
from ._util import save, saved
from .activation import check_dropout_p
from .flash_attention import attention_in_ops, flash_attention


class ScaledDotProductAttention(Function):
    name = "scaled_dot_product_attention"

    @staticmethod
    def forward(ctx, q, k, v, attn_mask, *, dropout_p, is_causal, scale, generator):
        xp = ctx.xp
        L, S = q.shape[-2], k.shape[-2]
        scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
        scores = matmul(xp, q, k.swapaxes(-1, -2))                 # (..., L, S): the one big buffer,
        scores *= scale                                             # updated in place from here on
        if is_causal:
            # an additive 0 / -inf mask: one arithmetic pass (a boolean `where` is several times slower)
            scores += xp.triu(xp.full((L, S), -xp.inf, dtype=scores.dtype), 1)
        elif attn_mask is not None and attn_mask.dtype.kind == "b":
            scores = xp.where(attn_mask, scores, -xp.inf)
        elif attn_mask is not None:
            scores = scores + attn_mask
        m = scores.max(axis=-1, keepdims=True)
        m = xp.where(xp.isfinite(m), m, 0)                          # fully masked row: exp(-inf) = 0
        scores -= m
        p = xp.exp(scores, out=scores)
        z = p.sum(axis=-1, keepdims=True)
        p /= xp.where(z > 0, z, 1)                                  # ... and its probabilities stay 0
        drop = None
        if dropout_p > 0:
            u = host_rng(generator).random(p.shape, dtype="float32" if p.dtype.itemsize <= 4 else "float64")
            drop = xp.asarray(u >= dropout_p).astype(p.dtype) * (1.0 / (1.0 - dropout_p)) \
                if dropout_p < 1 else xp.zeros_like(p)
        pd = p if drop is None else p * drop
        ctx.scale, ctx.causal = scale, is_causal
        save(ctx, q, k, v, p, drop, attn_mask)   # the mask: for the second derivative (vjp)
        return matmul(xp, pd, v)

    @staticmethod
    def backward(ctx, grad):
        q, k, v, p, drop, _ = saved(ctx)
        need_q, need_k, need_v, need_mask = ctx.needs_input_grad[:4]
        pd = p if drop is None else p * drop
        dv = matmul(ctx.xp, pd.swapaxes(-1, -2), grad) if need_v else None
        dq = dk = dmask = None
        if need_q or need_k or need_mask:
            dp = matmul(ctx.xp, grad, v.swapaxes(-1, -2))
            if drop is not None:
                dp *= drop
            row = (dp * p).sum(axis=-1, keepdims=True)              # softmax backward, in place:
            dp -= row                                               # ds = p * (dp - sum(dp * p))
            dp *= p
            ds = dp
            if need_mask:
                dmask = ds
            if need_q:
                dq = matmul(ctx.xp, ds, k)
                dq *= ctx.scale
            if need_k:
                dk = matmul(ctx.xp, ds.swapaxes(-1, -2), q)
                dk *= ctx.scale
        return dq, dk, dv, dmask

    @staticmethod
    def vjp(ctx, grad):
        q, k, v, _, drop, mask = saved(ctx)
        fn = lambda q, k, v, mask: attention_in_ops(q, k, v, mask, ctx.scale, ctx.causal, drop)  # noqa: E731
        return ctx.partials(fn, (q, k, v, mask), grad, ctx.needs_input_grad[:4])

    @staticmethod
    def jvp(primals, tangents, out, dropout_p, is_causal, scale, generator):
        q, k, v, mask = primals
        drop = None
        if dropout_p > 0:   # the mask forward drew: only on the node (recorded: grad mode and a grad input)
            node = out.grad_fn
            if not isinstance(node, ScaledDotProductAttention):
                raise ForwardADError("scaled_dot_product_attention: forward mode with dropout_p > 0 needs the "
                                     "dropout mask, kept only when the op is recorded (an input requiring grad)")
            drop = saved(node)[4]
            drop = None if drop is None else const(out, drop)
        scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
        return composite_jvp(lambda q, k, v, m: attention_in_ops(q, k, v, m, scale, is_causal, drop), primals,
                             tangents)


def _check_attention(q, k, v, attn_mask, is_causal):
    op = "scaled_dot_product_attention"
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
        raise ShapeError(f"{op}: query, key and value must be at least 2-D (..., L, E), got shapes "
                         f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if q.shape[-1] != k.shape[-1]:
        raise ShapeError(f"{op}: query has embedding size {q.shape[-1]} but key has {k.shape[-1]} "
                         f"(shapes {tuple(q.shape)} and {tuple(k.shape)})")
    if k.shape[-2] != v.shape[-2]:
        raise ShapeError(f"{op}: key has {k.shape[-2]} positions but value has {v.shape[-2]} "
                         f"(shapes {tuple(k.shape)} and {tuple(v.shape)})")
    if not (q.array.dtype == k.array.dtype == v.array.dtype):
        raise DTypeError(f"{op}: query, key and value must share a dtype, got {q.array.dtype}, {k.array.dtype}, "
                         f"{v.array.dtype}")
    try:
        batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except ValueError:
        raise ShapeError(f"{op}: batch dims of query {tuple(q.shape)}, key {tuple(k.shape)} and value "
                         f"{tuple(v.shape)} cannot be broadcast together") from None
    if attn_mask is None:
        return
    if is_causal:
        raise ArgumentError(f"{op}: pass either attn_mask or is_causal=True, not both")
    L, S = q.shape[-2], k.shape[-2]
    try:
        full = np.broadcast_shapes(attn_mask.shape, batch + (L, S))
    except ValueError:
        full = None
    if full is None or full[-2:] != (L, S):
        raise ShapeError(f"{op}: attn_mask shape {tuple(attn_mask.shape)} cannot be broadcast to the "
                         f"attention scores shape {tuple(batch) + (L, S)}")
    if attn_mask.array.dtype.kind != "b" and attn_mask.array.dtype != q.array.dtype:
        raise DTypeError(f"{op}: attn_mask must be bool or have the query's dtype {q.array.dtype}, got "
                         f"{attn_mask.array.dtype}")


FLASH_MIN_SCORES = 1024 * 1024   # from this many scores per head (L * S) on, attention is tiled


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None, generator=None, use_flash=None):
    """softmax(q @ k^T * scale + mask) @ v with q (..., L, E), k (..., S, E), v (..., S, Ev).

    attn_mask: bool (True = attend, as PyTorch) or float (added to the scores), broadcast to (..., L, S).
    is_causal: keep only j <= i (top-left aligned). scale defaults to 1/sqrt(E).
    Unlike PyTorch (NaN), a fully masked row outputs zeros and passes no gradient.
    dropout_p applies dropout to the attention weights (whenever > 0, as PyTorch's functional form).
    use_flash: the tiled O(L)-memory path (ops/nn/flash_attention.py); None picks it when
    L * S >= FLASH_MIN_SCORES and there is no dropout (the tiled path has none).
    """
    p = check_dropout_p("scaled_dot_product_attention", dropout_p)
    if p == 0 and (use_flash or use_flash is None and query.shape[-2] * key.shape[-2] >= FLASH_MIN_SCORES):
        return flash_attention(query, key, value, attn_mask, is_causal, scale)
    _check_attention(query, key, value, attn_mask, bool(is_causal))
    return ScaledDotProductAttention.apply(query, key, value, attn_mask, dropout_p=p, is_causal=bool(is_causal),
                                           scale=scale, generator=generator)
