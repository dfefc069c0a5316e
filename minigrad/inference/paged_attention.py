"""Attention that reads keys and values through block tables: the paged cache is never made contiguous.

For each sequence b, its keys live in ``k_cache[block_tables[b, j]]`` for j = 0, 1, ... (blocks of
``block_size`` slots; the last one partly filled). The op sweeps those blocks a *tile* at a time
(``tile_blocks`` blocks of every sequence per step: one gather of (B, tile_blocks, H, block_size, D)),
with FlashAttention's online softmax (``minigrad/ops/nn/flash_attention.py`` explains m, l and acc): a
running max, a running denominator and a running numerator, rescaled when the max grows. Memory is one
tile per step, whatever the context length; vLLM's CUDA kernel does the same walk with one thread block
per (sequence, head).

Positions: row b has ``context_lens[b]`` tokens cached (this call's included); its L queries are the last
L positions, so query i sits at ``context_lens[b] - L + i`` and sees keys at positions <= its own
(causal, bottom-right aligned; padding slots of a short sequence are past its length and never seen).

Inference only: there is no backward (the pool is not part of any autograd graph).
"""
import math

import numpy as np  # host-side lengths

from ..autograd.function import Function
from ..errors import ArgumentError, ShapeError

TILE_BLOCKS = 16   # blocks of every sequence gathered per step (256 keys at block_size 16)


class PagedAttention(Function):
    name = "paged_attention"

    @staticmethod
    def forward(ctx, q, *, k_cache, v_cache, block_tables, context_lens, scale, tile_blocks):
        xp = ctx.xp
        B, H, L, D = q.shape
        bs = k_cache.shape[2]
        tables = xp.asarray(block_tables)
        q_pos = xp.asarray(context_lens).reshape(B, 1, 1, 1) - L + xp.arange(L).reshape(1, 1, L, 1)
        qs = q * q.dtype.type(scale)
        n_blocks = -(-int(np.max(context_lens)) // bs)                  # host lengths: no device sync
        m = l = acc = None
        for j0 in range(0, n_blocks, tile_blocks):
            ids = tables[:, j0:min(j0 + tile_blocks, n_blocks)]            # (B, c)
            c = ids.shape[1]
            kt = k_cache[ids].transpose(0, 2, 1, 3, 4).reshape(B, H, c * bs, D)   # this tile only
            vt = v_cache[ids].transpose(0, 2, 1, 3, 4).reshape(B, H, c * bs, D)
            s = qs @ kt.swapaxes(-1, -2)                                   # (B, H, L, c*bs)
            k_pos = j0 * bs + xp.arange(c * bs).reshape(1, 1, 1, c * bs)
            s = xp.where(k_pos <= q_pos, s, -xp.inf)      # past the row's length, or a later position
            tile_max = s.max(axis=-1, keepdims=True)
            if m is None:                                  # first tile: nothing to rescale yet
                m = tile_max
                s -= xp.where(xp.isfinite(m), m, 0)
                p = xp.exp(s, out=s)
                l, acc = p.sum(axis=-1, keepdims=True), p @ vt
                continue
            m_new = xp.maximum(m, tile_max)
            shift = xp.where(xp.isfinite(m_new), m_new, 0)
            s -= shift
            p = xp.exp(s, out=s)
            alpha = xp.exp(m - shift)                      # rescale what was summed so far
            l = l * alpha + p.sum(axis=-1, keepdims=True)
            acc = acc * alpha + p @ vt
            m = m_new
        return acc / xp.where(l > 0, l, 1)

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError("paged_attention: inference only (the KV pool is not differentiable); use "
                           "F.scaled_dot_product_attention to train")


def paged_attention(q, k_cache, v_cache, block_tables, context_lens, scale=None, tile_blocks=TILE_BLOCKS):
    """softmax(q k^T * scale) v over each sequence's cached keys, read block by block.

    q: (B, H, L, D) Tensor (the last L positions of each row). k_cache, v_cache: the pool's arrays
    (num_blocks, H, block_size, D). block_tables: (B, max_blocks) int array (unused entries any valid id).
    context_lens: (B,) tokens cached per row, this call's included. Returns (B, H, L, D).
    """
    op = "paged_attention"
    if q.ndim != 4:
        raise ShapeError(f"{op}: query must be (B, H, L, D), got shape {tuple(q.shape)}")
    B, H, L, D = q.shape
    if k_cache.ndim != 4 or k_cache.shape != v_cache.shape or (k_cache.shape[1], k_cache.shape[3]) != (H, D):
        raise ShapeError(f"{op}: caches must be (num_blocks, {H}, block_size, {D}), got {tuple(k_cache.shape)} "
                         f"and {tuple(v_cache.shape)}")
    if k_cache.dtype != q.array.dtype:
        raise ShapeError(f"{op}: query dtype {q.array.dtype} differs from the cache's {k_cache.dtype}")
    if block_tables.ndim != 2 or block_tables.shape[0] != B or len(context_lens) != B:
        raise ShapeError(f"{op}: need block_tables (B={B}, max_blocks) and context_lens (B,), got "
                         f"{tuple(block_tables.shape)} and {len(context_lens)}")
    if min(context_lens) < L or max(context_lens) > block_tables.shape[1] * k_cache.shape[2]:
        raise ShapeError(f"{op}: context_lens {list(context_lens)} must be >= the {L} queries and fit "
                         f"{block_tables.shape[1]} blocks of {k_cache.shape[2]}")
    if int(tile_blocks) < 1:
        raise ArgumentError(f"{op}: tile_blocks must be >= 1, got {tile_blocks}")
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    context_lens = np.asarray(context_lens, dtype=np.int64)
    return PagedAttention.apply(q, k_cache=k_cache, v_cache=v_cache, block_tables=block_tables,
                                context_lens=context_lens, scale=scale, tile_blocks=int(tile_blocks))
