"""The paged KV pool: all layers' keys and values in fixed-size blocks, plus its memory statistics.

Layout: per layer, ``k[layer]`` and ``v[layer]`` are (num_blocks, H, block_size, D) arrays allocated once,
when the engine starts (vLLM sizes the pool from the memory left after the weights). A *slot* is
``block * block_size + offset``. One block holds ``block_size`` tokens of every layer::

    block_bytes = 2 (k and v) * n_layers * H * D * itemsize * block_size

``PagedBatch`` is one forward's view of the pool, in the cache protocol of ``kv_cache.py``:
``position_ids(L)`` gives each row its own positions, ``layer(i).attend(q, k, v)`` writes this call's keys
and values into their slots and runs ``paged_attention`` through the block tables.

``KVHistory`` records block allocations and frees as events in the memory module's format
(``minigrad/memory/history.py``), so ``mg.memory.plot_timeline(snapshot)`` draws the pool's timeline with
one band per request.
"""
import time

import numpy as np

from ..backend import get_backend
from ..backend.device import device as _device
from ..backend.dtypes import np_dtype
from ..tensor import tensor
from .paged_attention import TILE_BLOCKS, paged_attention


class PagedKVPool:
    def __init__(self, num_layers, num_blocks, block_size, num_heads, head_dim, dtype="float32", device="cpu"):
        self.num_layers, self.num_blocks, self.block_size = num_layers, num_blocks, block_size
        self.num_heads, self.head_dim = num_heads, head_dim
        self.device = _device(device)
        xp = get_backend(self.device).xp
        dt = np_dtype(dtype)
        self.xp = xp
        shape = (num_blocks, num_heads, block_size, head_dim)
        self.k = [xp.zeros(shape, dtype=dt) for _ in range(num_layers)]
        self.v = [xp.zeros(shape, dtype=dt) for _ in range(num_layers)]
        self.itemsize = np.dtype(dt).itemsize
        self.block_bytes = 2 * num_layers * num_heads * head_dim * self.itemsize * block_size
        self.history = None

    @property
    def nbytes(self):
        """Bytes the pool holds (all layers, keys and values): num_blocks * block_bytes."""
        return sum(a.nbytes for a in self.k + self.v)

    def write(self, layer, slots, k, v):
        """Store rows of k, v ((T, H, D) arrays) at ``slots`` (T,); slots < 0 are skipped (already cached)."""
        keep = slots >= 0
        if not keep.all():
            if not keep.any():
                return
            rows = self.xp.asarray(np.flatnonzero(keep))
            slots, k, v = slots[keep], k[rows], v[rows]
        blk, off = self.xp.asarray(slots // self.block_size), self.xp.asarray(slots % self.block_size)
        self.k[layer][blk, :, off, :] = k
        self.v[layer][blk, :, off, :] = v

    def copy_block(self, src, dst):
        """Copy-on-write: block ``src``'s keys and values, every layer, into ``dst``."""
        for a in self.k + self.v:
            a[dst] = a[src]

    def record_history(self, enabled=True):
        """Start (a fresh log) or stop recording block events for ``snapshot()`` / the timeline plot."""
        self.history = KVHistory(self) if enabled else None

    def snapshot(self):
        """Events in ``minigrad.memory``'s snapshot format (``mg.memory.plot_timeline(snapshot=...)``)."""
        return {"device": f"{self.device} (paged KV pool)", "recording": self.history is not None,
                "events": [] if self.history is None else list(self.history.events), "segments": [],
                "stats": {}}


class KVHistory:
    """Block alloc/free events, each a memory-history dict whose cause is the request that took the block."""

    def __init__(self, pool):
        self.pool, self.events, self.allocated, self.t0 = pool, [], 0, time.perf_counter()

    def record(self, action, block, owner):
        size = self.pool.block_bytes
        self.allocated += size if action == "alloc" else -size
        cause = f"request {owner}"
        self.events.append({"seq": len(self.events), "time": time.perf_counter() - self.t0, "action": action,
                            "address": block * size, "size": size, "requested": size, "pool": "kv",
                            "op": cause, "label": None, "cause": cause, "allocated_bytes": self.allocated,
                            "reserved_bytes": self.pool.nbytes})


class PagedBatch:
    """One forward over B sequences of the pool: each row's L new tokens sit at the end of its context.

    block_tables: B lists of block ids; context_lens: tokens per row after this call; write_from: the first
    position per row whose keys and values must be written (earlier ones are cached, in shared blocks).
    """

    def __init__(self, pool, block_tables, context_lens, query_len, write_from=None, tile_blocks=TILE_BLOCKS):
        B, L, bs = len(block_tables), int(query_len), pool.block_size
        self.pool, self.L, self.tile_blocks = pool, L, tile_blocks
        self.context_lens = np.asarray(context_lens, dtype=np.int64)
        width = max(len(t) for t in block_tables)
        tables = np.zeros((B, width), dtype=np.int64)
        for b, t in enumerate(block_tables):
            tables[b, :len(t)] = t
        self.positions = self.context_lens[:, None] - L + np.arange(L)[None, :]        # (B, L)
        slots = tables[np.arange(B)[:, None], self.positions // bs] * bs + self.positions % bs
        if write_from is not None:
            slots = np.where(self.positions >= np.asarray(write_from)[:, None], slots, -1)
        self.slots = slots.reshape(-1)
        xp = get_backend(pool.device).xp
        self.block_tables = xp.asarray(tables)

    def position_ids(self, L):
        return tensor(self.positions, dtype="int64", device=self.pool.device)

    def layer(self, i):
        return PagedLayer(self, i)


class PagedLayer:
    def __init__(self, batch, index):
        self.batch, self.index = batch, index

    def attend(self, q, k, v):
        bt, pool = self.batch, self.batch.pool
        B, H, L, D = k.shape
        rows = lambda t: t.array.transpose(0, 2, 1, 3).reshape(B * L, H, D)   # (B*L, H, D) in slot order
        pool.write(self.index, bt.slots, rows(k), rows(v))
        return paged_attention(q, pool.k[self.index], pool.v[self.index], bt.block_tables, bt.context_lens,
                               tile_blocks=bt.tile_blocks)

