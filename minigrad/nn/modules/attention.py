"""MultiheadAttention on top of ``F.scaled_dot_product_attention``.

Parameters and their names follow PyTorch (``in_proj_weight`` (3E, E), ``in_proj_bias``, ``out_proj``), so
state dicts map one to one. Inputs are (L, N, E) by default, as in PyTorch; ``batch_first=True`` takes
(N, L, E) (what minigrad's own models use); unbatched (L, E) also works. Differences from
``torch.nn.MultiheadAttention``:

* ``is_causal=True`` without ``attn_mask`` builds the causal mask itself (PyTorch requires the mask too);
  with ``attn_mask`` both apply (a position is kept only if both allow it).
* ``key`` and ``value`` default to ``query`` (self-attention).
* ``kv_cache`` (inference): a per-layer cache object (``minigrad.inference``) that stores this call's keys
  and values and attends the queries over everything cached so far (incremental decoding; PyTorch's module
  has no cache, Hugging Face's models pass ``past_key_values``).

Mask conventions are PyTorch's MultiheadAttention ones: in a bool ``attn_mask`` (L, S) or (N*H, L, S) and a
bool ``key_padding_mask`` (N, S), True means *masked out*; float masks are added to the scores.
"""
import math

from ...creation import ones, zeros
from ...errors import ArgumentError, ShapeError
from .. import functional as F
from .. import init
from ..module import Module
from .linear import Linear
from ._factory import new_param


class MultiheadAttention(Module):
    """Multi-head attention: ``out_proj(concat_h softmax(q_h k_h^T / sqrt(d) + mask) v_h)``.

    forward(query, key=None, value=None, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True, is_causal=False) -> (output (N, L, E), weights (N, L, S) or (N, H, L, S), or
    None when ``need_weights=False``). ``need_weights=False`` takes the fused attention op (faster, less
    memory); ``dropout`` applies to the attention weights in training mode.

    ``kv_cache``: self-attention only, batched, no masks, ``is_causal=True``: ``kv_cache.attend(q, k, v)``
    appends this call's k, v (N, H, L, D) to the cache and returns the queries attended over every cached
    position, causally (query i sits at position ``cached + i``). Any object with that method serves: a
    contiguous ``LayerKVCache`` or a view of the paged pool.
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, kdim=None, vdim=None, batch_first=False,
                 device=None, dtype=None):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ArgumentError(f"MultiheadAttention: embed_dim and num_heads must be > 0, got {embed_dim} "
                                f"and {num_heads}")
        if embed_dim % num_heads:
            raise ArgumentError(f"MultiheadAttention: embed_dim ({embed_dim}) must be divisible by num_heads "
                                f"({num_heads})")
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.dropout = float(dropout)
        self.batch_first = batch_first
        kw = dict(device=device, dtype=dtype)
        if self._qkv_same_embed_dim:
            self.in_proj_weight = new_param(3 * embed_dim, embed_dim, **kw)
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.register_parameter("in_proj_weight", None)
            self.q_proj_weight = new_param(embed_dim, embed_dim, **kw)
            self.k_proj_weight = new_param(embed_dim, self.kdim, **kw)
            self.v_proj_weight = new_param(embed_dim, self.vdim, **kw)
        if bias:
            self.in_proj_bias = new_param(3 * embed_dim, **kw)
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, **kw)
        self._reset_parameters()

    def _reset_parameters(self, generator=None):
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight, generator=generator)
        else:
            for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(w, generator=generator)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)

    # --- projections and masks ----------------------------------------------------------------------
    def _project(self, query, key, value):
        E = self.embed_dim
        b = self.in_proj_bias
        if self._qkv_same_embed_dim and query is key and key is value:   # self-attention: one GEMM
            return F.linear(query, self.in_proj_weight, b).split(E, dim=-1)
        bq, bk, bv = (None, None, None) if b is None else (b[:E], b[E:2 * E], b[2 * E:])
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            wq, wk, wv = w[:E], w[E:2 * E], w[2 * E:]
        else:
            wq, wk, wv = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        return F.linear(query, wq, bq), F.linear(key, wk, bk), F.linear(value, wv, bv)

    def _merge_masks(self, attn_mask, key_padding_mask, is_causal, N, L, S, dtype, device):
        """One mask in scaled_dot_product_attention's convention (bool: True = keep; float: added),
        broadcastable to (N, H, L, S), plus whether the causal mask is the only one (fast path)."""
        H = self.num_heads
        parts = []
        if attn_mask is not None:
            if attn_mask.ndim == 3:
                if tuple(attn_mask.shape) != (N * H, L, S):
                    raise ShapeError(f"MultiheadAttention: 3-D attn_mask must have shape {(N * H, L, S)}, got "
                                     f"{tuple(attn_mask.shape)}")
                attn_mask = attn_mask.reshape(N, H, L, S)
            elif tuple(attn_mask.shape) != (L, S):
                raise ShapeError(f"MultiheadAttention: 2-D attn_mask must have shape {(L, S)}, got "
                                 f"{tuple(attn_mask.shape)}")
            parts.append(attn_mask)
        if key_padding_mask is not None:
            if tuple(key_padding_mask.shape) != (N, S):
                raise ShapeError(f"MultiheadAttention: key_padding_mask must have shape {(N, S)}, got "
                                 f"{tuple(key_padding_mask.shape)}")
            parts.append(key_padding_mask.reshape(N, 1, 1, S))
        if not parts:
            return None, bool(is_causal)
        if is_causal:
            parts.append(~ones(L, S, dtype="bool", device=device).tril())
        if all(p.dtype.name == "bool" for p in parts):
            masked = parts[0]
            for p in parts[1:]:
                masked = masked | p
            return ~masked, False
        total = None
        for p in parts:
            if p.dtype.name == "bool":
                p = zeros(*p.shape, dtype=dtype, device=device).masked_fill(p, float("-inf"))
            elif p.dtype != dtype:
                p = p.to(dtype)
            total = p if total is None else total + p
        return total, False

    # --- forward ------------------------------------------------------------------------------------
    def forward(self, query, key=None, value=None, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False, kv_cache=None):
        if kv_cache is not None:
            return self._forward_cached(query, key, value, key_padding_mask, attn_mask, is_causal, kv_cache)
        key = query if key is None else key
        value = key if value is None else value
        batched = query.ndim == 3
        if not batched:
            if query.ndim != 2:
                raise ShapeError(f"MultiheadAttention: query must be (N, L, E) or unbatched (L, E), got shape "
                                 f"{tuple(query.shape)}")
            same = query is key, key is value
            query = query.unsqueeze(0)
            key = query if same[0] else key.unsqueeze(0)
            value = key if same[1] else value.unsqueeze(0)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif not self.batch_first:
            same = query is key, key is value
            query = query.transpose(0, 1)
            key = query if same[0] else key.transpose(0, 1)
            value = key if same[1] else value.transpose(0, 1)
        N, L, E = query.shape
        if E != self.embed_dim:
            raise ShapeError(f"MultiheadAttention: query has embedding size {E}, expected {self.embed_dim}")
        S = key.shape[1]
        H, D = self.num_heads, self.head_dim
        q, k, v = self._project(query, key, value)
        q = q.reshape(N, L, H, D).transpose(1, 2)     # (N, H, L, D)
        k = k.reshape(N, S, H, D).transpose(1, 2)
        v = v.reshape(N, S, H, D).transpose(1, 2)
        mask, causal = self._merge_masks(attn_mask, key_padding_mask, is_causal, N, L, S, q.dtype, q.device)
        p = self.dropout if self.training else 0.0
        weights = None
        if need_weights:
            scores = (q * (1.0 / math.sqrt(D))) @ k.transpose(-2, -1)   # (N, H, L, S)
            if causal:
                mask = ones(L, S, dtype="bool", device=q.device).tril()
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype.name == "bool" \
                    else scores + mask
            weights = F.softmax(scores, dim=-1)
            if p > 0:
                weights = F.dropout(weights, p)
            out = weights @ v
            if average_attn_weights:
                weights = weights.mean(dim=1)
            if not batched:
                weights = weights.squeeze(0)
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p, is_causal=causal)
        out = out.transpose(1, 2).reshape(N, L, E)
        out = self.out_proj(out)
        if not batched:
            out = out.squeeze(0)
        elif not self.batch_first:
            out = out.transpose(0, 1)
        return out, weights

    def _forward_cached(self, x, key, value, key_padding_mask, attn_mask, is_causal, kv_cache):
        """Incremental decoding: x (N, L, E) are the new positions; the cache holds the earlier ones."""
        if (key is not None and key is not x) or (value is not None and value is not x):
            raise ArgumentError("MultiheadAttention: kv_cache works for self-attention only (key and value "
                                "must be the query)")
        if attn_mask is not None or key_padding_mask is not None or not is_causal:
            raise ArgumentError("MultiheadAttention: kv_cache needs is_causal=True and no attn_mask or "
                                "key_padding_mask (the cache applies the causal mask itself)")
        if x.ndim != 3 or not self.batch_first or x.shape[-1] != self.embed_dim:
            raise ShapeError(f"MultiheadAttention: kv_cache needs batch_first (N, L, {self.embed_dim}) "
                             f"inputs, got shape {tuple(x.shape)}")
        N, L, E = x.shape
        H, D = self.num_heads, self.head_dim
        if self._qkv_same_embed_dim:   # one GEMM, one reshape, one permute: fewest ops per decoded token
            qkv = F.linear(x, self.in_proj_weight, self.in_proj_bias).reshape(N, L, 3, H, D).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
        else:
            q, k, v = (t.reshape(N, L, H, D).transpose(1, 2) for t in self._project(x, x, x))
        out = kv_cache.attend(q, k, v)                   # (N, H, L, D)
        return self.out_proj(out.transpose(1, 2).reshape(N, L, E)), None

    def extra_repr(self):
        return (f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, dropout={self.dropout}, "
                f"batch_first={self.batch_first}")
