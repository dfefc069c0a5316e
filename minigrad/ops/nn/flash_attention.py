"""Memory-efficient attention: FlashAttention's tiled online softmax, forward and backward side by side.

``softmax(q k^T * scale + mask) @ v`` without ever holding the (L, S) score matrix. Queries are taken in
blocks of ``block_size`` rows; for each block the keys are swept in blocks too, and every row keeps three
running quantities (Dao et al. 2022, Algorithm 1; Milakov & Gimelshein 2018's online softmax):

    m   the largest score seen so far               m' = max(m, rowmax(S_ij))
    l   the softmax denominator, relative to m      l' = l * exp(m - m') + rowsum(exp(S_ij - m'))
    acc the numerator @ v, relative to m            acc' = acc * exp(m - m') + exp(S_ij - m') @ V_j

When the maximum grows, what was summed so far is *rescaled* by ``exp(m - m')``: this is the step that
makes a one-pass softmax exact. At the end ``out = acc / l`` and the row's log-sum-exp ``lse = m + log l``
is saved. Backward recomputes each score tile from q, k and ``lse`` (``P_ij = exp(S_ij - lse)``, exact,
no renormalisation) and accumulates dq, dk, dv tile by tile, with ``D = rowsum(dO * O)`` standing in for
the softmax backward's row sum (FlashAttention-2's backward). Memory is O(L) per head instead of O(L S).

Semantics are those of ``F.scaled_dot_product_attention``: a bool mask keeps the positions where it is
True, a float mask is added to the scores, ``is_causal`` keeps j <= i (top-left aligned), and a fully
masked row outputs zeros and passes no gradient. Dropout on the attention weights is not supported here.
"""
import math

import numpy as np  # shape arithmetic only

from ...autograd.function import Function
from ...errors import ArgumentError, DTypeError, ShapeError

BLOCK = 512   # rows of q (and of k) per tile: a (.., 512, 512) score tile whatever L and S are (fewer, larger
#               BLAS calls: on CPU, per-call overhead and thread wake-ups dominate small tiles)


def _tiles(n, block):
    return [(i, min(i + block, n)) for i in range(0, n, block)]


def _scores(xp, qi, kj, scale, i, j, causal, mask):
    """The tile S_ij = q_i k_j^T * scale with the mask applied (-inf where masked)."""
    s = qi @ kj.swapaxes(-1, -2)
    s *= scale
    (i0, i1), (j0, j1) = i, j
    if causal:
        rows = xp.arange(i0, i1)[:, None]
        cols = xp.arange(j0, j1)[None, :]
        s = xp.where(cols > rows, -xp.inf, s)
    elif mask is not None:
        tile = mask[..., i0:i1, j0:j1]
        s = xp.where(tile, s, -xp.inf) if tile.dtype.kind == "b" else s + tile
    return s


class FlashAttention(Function):
    name = "flash_attention"

    @staticmethod
    def forward(ctx, q, k, v, attn_mask, *, is_causal=False, scale=None, block_size=BLOCK):
        xp = ctx.xp
        batch = _check(q, k, v, attn_mask, is_causal, block_size)
        L, S, Ev = q.shape[-2], k.shape[-2], v.shape[-1]
        scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
        mask = None if attn_mask is None else xp.broadcast_to(attn_mask, batch + (L, S))
        out = ctx.empty(batch + (L, Ev), q.dtype)
        lse = ctx.empty(batch + (L, 1), q.dtype)
        for i in _tiles(L, block_size):
            qi = q[..., i[0]:i[1], :]
            m = xp.full(batch + (i[1] - i[0], 1), -xp.inf, dtype=q.dtype)   # running max
            l = xp.zeros_like(m)                                             # running denominator
            acc = xp.zeros(batch + (i[1] - i[0], Ev), dtype=q.dtype)         # running numerator @ v
            for j in _tiles(S, block_size):
                if is_causal and j[0] > i[1] - 1:
                    break                                  # this key block and all after are masked
                s = _scores(xp, qi, k[..., j[0]:j[1], :], scale, i, j, is_causal, mask)
                m_new = xp.maximum(m, s.max(axis=-1, keepdims=True))
                shift = xp.where(xp.isfinite(m_new), m_new, 0)   # rows masked so far: exp(-inf) = 0
                s -= shift                                       # s is this tile's own array: in place
                p = xp.exp(s, out=s)
                alpha = xp.exp(m - shift)                        # rescale what was summed before
                l *= alpha
                l += p.sum(axis=-1, keepdims=True)
                acc *= alpha
                acc += p @ v[..., j[0]:j[1], :]
                m = m_new
            out[..., i[0]:i[1], :] = acc / xp.where(l > 0, l, 1)            # fully masked row: 0
            with np.errstate(divide="ignore"):
                lse[..., i[0]:i[1], :] = xp.where(l > 0, xp.where(xp.isfinite(m), m, 0) + xp.log(
                    xp.where(l > 0, l, 1)), xp.inf)   # +inf: P = exp(s - inf) = 0 in backward
        ctx.scale, ctx.causal, ctx.block = scale, is_causal, block_size
        ctx.save_for_backward(q, k, v, out, lse, mask)
        return out

    @staticmethod
    def vjp(ctx, grad):
        q, k, v, _, _, mask = ctx.saved_tensors
        if mask is not None and ctx.needs_input_grad[3]:
            mask = ctx.input_as(3, mask.array)   # a broadcast view of the mask: the mask's place in the graph
        fn = lambda q, k, v, m: attention_in_ops(q, k, v, m, ctx.scale, ctx.causal)  # noqa: E731
        return ctx.partials(fn, (q, k, v, mask), grad, ctx.needs_input_grad)

    @staticmethod
    def jvp(primals, tangents, out, is_causal=False, scale=None, block_size=BLOCK):
        from .._rules import composite_jvp
        scale = 1.0 / math.sqrt(primals[0].shape[-1]) if scale is None else float(scale)
        return composite_jvp(lambda q, k, v, m: attention_in_ops(q, k, v, m, scale, is_causal), primals, tangents)

    @staticmethod
    def backward(ctx, grad):
        xp = ctx.xp
        q, k, v, out, lse, mask = ctx.saved_tensors
        need_q, need_k, need_v, need_mask = ctx.needs_input_grad
        batch, (L, S) = out.shape[:-2], (q.shape[-2], k.shape[-2])
        scale, block = ctx.scale, ctx.block
        D = (grad * out).sum(axis=-1, keepdims=True)          # rowsum(dO * O) = rowsum(P * dP)
        dq = xp.zeros(batch + q.shape[-2:], q.dtype)
        dk = xp.zeros(batch + k.shape[-2:], k.dtype)
        dv = xp.zeros(batch + v.shape[-2:], v.dtype)
        dmask = xp.zeros(batch + (L, S), q.dtype) if need_mask else None
        for i in _tiles(L, block):
            qi, gi = q[..., i[0]:i[1], :], grad[..., i[0]:i[1], :]
            for j in _tiles(S, block):
                if ctx.causal and j[0] > i[1] - 1:
                    break
                kj, vj = k[..., j[0]:j[1], :], v[..., j[0]:j[1], :]
                s = _scores(xp, qi, kj, scale, i, j, ctx.causal, mask)
                s -= lse[..., i[0]:i[1], :]
                p = xp.exp(s, out=s)                           # recomputed exactly from the saved lse
                dv[..., j[0]:j[1], :] += p.swapaxes(-1, -2) @ gi
                ds = gi @ vj.swapaxes(-1, -2)
                ds -= D[..., i[0]:i[1], :]
                ds *= p
                if need_mask:
                    dmask[..., i[0]:i[1], j[0]:j[1]] = ds
                dq[..., i[0]:i[1], :] += (ds @ kj) * scale
                dk[..., j[0]:j[1], :] += (ds.swapaxes(-1, -2) @ qi) * scale
        return (dq if need_q else None), (dk if need_k else None), (dv if need_v else None), dmask


def _check(q, k, v, attn_mask, is_causal, block_size):
    """The batch shape of the result; errors name the op and the shapes."""
    op = "flash_attention"
    shapes = f"query {tuple(q.shape)}, key {tuple(k.shape)}, value {tuple(v.shape)}"
    if min(q.ndim, k.ndim, v.ndim) < 2 or q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ShapeError(f"{op}: need query (..., L, E), key (..., S, E), value (..., S, Ev); got {shapes}")
    if not (q.dtype == k.dtype == v.dtype) or q.dtype.kind != "f":
        raise DTypeError(f"{op}: query, key and value must share a floating dtype, got {q.dtype}, {k.dtype}, "
                         f"{v.dtype}")
    if int(block_size) < 1:
        raise ArgumentError(f"{op}: block_size must be a positive integer, got {block_size}")
    try:
        batch = tuple(np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2]))
    except ValueError:
        raise ShapeError(f"{op}: batch dims of {shapes} cannot be broadcast together") from None
    if attn_mask is not None:
        if is_causal:
            raise ArgumentError(f"{op}: pass either attn_mask or is_causal=True, not both")
        full = batch + (q.shape[-2], k.shape[-2])
        try:
            ok = np.broadcast_shapes(attn_mask.shape, full) == full
        except ValueError:
            ok = False
        if not ok:
            raise ShapeError(f"{op}: attn_mask shape {tuple(attn_mask.shape)} cannot be broadcast to the "
                             f"attention scores shape {full}")
        if attn_mask.dtype.kind != "b" and attn_mask.dtype != q.dtype:
            raise DTypeError(f"{op}: attn_mask must be bool or have the query's dtype {q.dtype}, got "
                             f"{attn_mask.dtype}")
    return batch


def flash_attention(q, k, v, attn_mask=None, is_causal=False, scale=None, block_size=BLOCK):
    """Tiled attention, equal to ``F.scaled_dot_product_attention(q, k, v, attn_mask, 0.0, is_causal, scale)``
    with O(L) memory instead of O(L S). ``block_size``: query and key rows per tile."""
    return FlashAttention.apply(q, k, v, attn_mask, is_causal=bool(is_causal), scale=scale,
                                block_size=int(block_size))


def attention_in_ops(q, k, v, mask, scale, causal, drop=None):
    """softmax(q k^T * scale + mask) (* drop) @ v in minigrad ops, with this module's semantics (a fully
    masked row gives zeros): what both attention ops differentiate for higher order and forward mode."""
    from ..elementwise import where
    from .._rules import const
    from .activation import softmax
    s = (q @ k.transpose(-1, -2)) * scale
    xp = s.device.xp
    L, S = s.shape[-2:]
    if causal:
        s = s.masked_fill(const(s, xp.triu(xp.ones((L, S), dtype=bool), 1)), -xp.inf)
    elif mask is not None and mask.array.dtype.kind == "b":
        s = s.masked_fill(const(s, ~mask.array), -xp.inf)
    elif mask is not None:
        s = s + mask
    alive = const(s, xp.isfinite(s.array).any(axis=-1, keepdims=True))   # rows with a position to attend
    p = where(alive, softmax(where(alive, s, 0.0), -1), 0.0)
    return (p if drop is None else p * drop) @ v
