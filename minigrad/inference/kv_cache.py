"""The contiguous KV cache: each layer keeps its keys and values in one preallocated (N, H, S_max, D) buffer.

Why a cache at all? A decoder produces one token per forward. Without a cache, step t runs the model over
all t tokens again (O(t) work per token, O(T^2) per sequence), although the keys and values of the first
t - 1 positions are exactly what the previous step computed: attention is causal, so an earlier position
never sees a later one. With the cache, step t computes q, k, v for the one new position only, appends
k and v to the cache and attends the new query over everything cached: O(1) projections per token.

The price is memory, and it is the size formula the lecture checks against the pool::

    bytes = 2 (k and v) * n_layers * n_heads * head_dim * itemsize * tokens

This module reserves it up front for ``max_len`` tokens per sequence (as Hugging Face's ``StaticCache``):
no reallocation while decoding, but a sequence that stops early wastes the rest of its rows. That waste
is what the paged cache (``block_manager.py``, ``kv_pool.py``) removes.

The cache objects follow a small protocol that models call (``TinyGPT.forward`` in
``minigrad/examples/tiny_gpt.py``) and that the paged pool's views implement too:

* ``cache.position_ids(L)``: the positions of the L new tokens ((L,) here, every row shares them);
* ``cache.layer(i)``: layer i's cache, handed to ``nn.MultiheadAttention(..., kv_cache=...)``, which calls
  ``layer.attend(q, k, v)`` with this call's (N, H, L, D) projections.
"""
import numpy as np

from ..creation import arange, ones, zeros
from ..errors import ArgumentError, ShapeError
from ..nn import functional as F
from ..tensor import Tensor


def causal_mask(L, S, device):
    """Bool (L, S) mask for L new queries at the end of S keys: query i (position S - L + i) keeps key j
    when j <= S - L + i (the causal mask aligned to the bottom right, as in decoding)."""
    return ones(L, S, dtype="bool", device=device).tril(S - L)


class LayerKVCache:
    """One layer's keys and values for a batch of N sequences that advance together."""

    def __init__(self, batch_size, num_heads, head_dim, max_len, dtype, device):
        shape = (batch_size, num_heads, max_len, head_dim)
        self.k = zeros(*shape, dtype=dtype, device=device)
        self.v = zeros(*shape, dtype=dtype, device=device)
        self.max_len = max_len
        self.length = 0                   # positions cached so far (the same for every row)

    def attend(self, q, k, v):
        """Append k, v (N, H, L, D) at positions [length, length + L) and attend q over all of them."""
        N, H, L, D = q.shape
        start, end = self.length, self.length + L
        if tuple(k.shape) != (self.k.shape[0], self.k.shape[1], L, self.k.shape[3]) or k.shape != v.shape:
            raise ShapeError(f"KVCache.attend: keys {tuple(k.shape)} and values {tuple(v.shape)} do not fit a "
                             f"cache of shape {tuple(self.k.shape)} (N, H, S_max, D)")
        if end > self.max_len:
            raise ShapeError(f"KVCache.attend: {L} new positions after {start} cached exceed the cache's "
                             f"max_len={self.max_len}")
        # stored as values (no autograd: the cache is inference state), read back as views of the buffer
        self.k.array[:, :, start:end] = k.array
        self.v.array[:, :, start:end] = v.array
        self.length = end
        keys = Tensor._make(self.k.array[:, :, :end], self.k.device)
        values = Tensor._make(self.v.array[:, :, :end], self.v.device)
        mask = None if L == 1 else causal_mask(L, end, q.device)   # one new query sees every cached key
        return F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)

    @property
    def nbytes(self):
        return self.k.nbytes + self.v.nbytes


class KVCache:
    """Per-layer contiguous caches for ``batch_size`` sequences of up to ``max_len`` tokens.

    ``KVCache.for_model(model, batch_size, max_len)`` reads the layer count, heads, head size, dtype and
    device from the model's ``nn.MultiheadAttention`` modules.
    """

    def __init__(self, num_layers, batch_size, num_heads, head_dim, max_len, dtype="float32", device="cpu"):
        if min(num_layers, batch_size, num_heads, head_dim, max_len) <= 0:
            raise ArgumentError(f"KVCache: sizes must be positive, got num_layers={num_layers}, batch_size="
                                f"{batch_size}, num_heads={num_heads}, head_dim={head_dim}, max_len={max_len}")
        self.layers = [LayerKVCache(batch_size, num_heads, head_dim, max_len, dtype, device)
                       for _ in range(num_layers)]
        self.batch_size, self.max_len, self.device = batch_size, max_len, device

    @classmethod
    def for_model(cls, model, batch_size, max_len):
        spec = model_spec(model)
        return cls(spec.num_layers, batch_size, spec.num_heads, spec.head_dim, max_len, spec.dtype, spec.device)

    @property
    def seq_len(self):
        """Tokens cached so far."""
        return self.layers[0].length

    def position_ids(self, L):
        start = self.seq_len
        if start + L > self.max_len:
            raise ShapeError(f"KVCache: {L} new tokens after {start} cached exceed max_len={self.max_len}")
        return arange(start, start + L, device=self.device)

    def layer(self, i):
        return self.layers[i]

    @property
    def nbytes(self):
        """Bytes reserved for keys and values (all layers, the whole max_len)."""
        return sum(layer.nbytes for layer in self.layers)

    def __repr__(self):
        return (f"KVCache(layers={len(self.layers)}, batch={self.batch_size}, cached={self.seq_len}/"
                f"{self.max_len}, {self.nbytes} bytes)")


class ModelSpec:
    """What a cache needs to know about a model: layers, heads, head size, dtype, device, context, vocab."""

    def __init__(self, num_layers, num_heads, head_dim, dtype, device, max_context, vocab_size):
        self.num_layers, self.num_heads, self.head_dim = num_layers, num_heads, head_dim
        self.dtype, self.device, self.max_context, self.vocab_size = dtype, device, max_context, vocab_size

    def kv_bytes_per_token(self, itemsize=None):
        """2 (k and v) * layers * heads * head_dim * itemsize: the KV-cache size formula."""
        size = itemsize if itemsize is not None else _itemsize(self.dtype)
        return 2 * self.num_layers * self.num_heads * self.head_dim * size


def _itemsize(dtype):
    return np.dtype(getattr(dtype, "name", dtype)).itemsize


def model_spec(model):
    """The ModelSpec of a decoder: its ``nn.MultiheadAttention`` layers in order, the first parameter's
    dtype and device, ``model.block_size`` (the context length, nanoGPT's name) and the vocabulary size
    (rows of the first ``nn.Embedding``)."""
    from ..nn import Embedding, MultiheadAttention
    attns = [m for m in model.modules() if isinstance(m, MultiheadAttention)]
    if not attns:
        raise ArgumentError(f"inference: {type(model).__name__} has no nn.MultiheadAttention layer to cache")
    first = next(model.parameters())
    emb = next((m for m in model.modules() if isinstance(m, Embedding)), None)
    return ModelSpec(len(attns), attns[0].num_heads, attns[0].head_dim, first.dtype, first.device,
                     getattr(model, "block_size", None), None if emb is None else emb.num_embeddings)
