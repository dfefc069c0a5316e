"""Tensor-parallel layers: each rank holds a slice of the weight and the comm ops make the slices add up.

    ColumnParallelLinear   W split by output rows:   y_r = f(x) @ W_r.T (+ b_r)   (all-gather if gather_output)
    RowParallelLinear      W split by input columns: y = g(x_r @ W_r.T) + b
    VocabParallelEmbedding the vocabulary split:     rank r looks up the ids it holds, zeros elsewhere, g sums
    TensorParallelAttention the heads split:         q, k, v column-parallel by head, out_proj row-parallel

A column-parallel layer followed by a row-parallel one (an MLP, or attention) needs one all-reduce forward
and one backward: the hidden activations stay sharded. ``from_linear`` / ``from_embedding`` /
``from_attention`` build a layer from a full module: the full weights are first broadcast from the group's
first rank (PyTorch's ``src_data_rank=0``), so every rank slices the same tensor.
"""
from ...autograd.grad_mode import no_grad
from ...backend.device import get_backend
from ...creation import ones
from ...errors import ArgumentError, ShapeError
from ...nn import functional as F
from ...nn.module import Module
from ...nn.parameter import Parameter
from .. import collectives
from .comm_ops import copy_to_parallel, gather_from_parallel, group_rank_size, reduce_from_parallel, \
    scatter_to_parallel

__all__ = ["ColumnParallelLinear", "RowParallelLinear", "VocabParallelEmbedding", "TensorParallelAttention",
           "shard_of"]


def shard_of(tensor, dim, group, what, parts=None):
    """This rank's contiguous slice of ``tensor`` along ``dim`` (the full tensor broadcast from the group's
    first rank first), as a new Parameter. ``parts``: lists of slices to take and concatenate (q, k, v)."""
    rank, n = group_rank_size(group)
    full = tensor.detach().contiguous()
    with no_grad():
        collectives.broadcast(full, src=(group.ranks[0] if group is not None else 0), group=group)
    blocks = parts if parts is not None else [(0, full.shape[dim])]
    pieces = []
    for start, stop in blocks:
        width = stop - start
        if width % n:
            raise ShapeError(f"{what}: dimension {dim} of size {width} does not split evenly over {n} ranks")
        k = width // n
        index = [slice(None)] * full.ndim
        index[dim] = slice(start + rank * k, start + (rank + 1) * k)
        pieces.append(full.array[tuple(index)])
    xp = full.device.xp
    data = xp.concatenate(pieces, axis=dim) if len(pieces) > 1 else pieces[0]
    storage = get_backend(full.device).empty(data.shape, data.dtype)  # from the pool, when one is on
    storage[...] = data
    return Parameter(type(full)._make(storage, full.device))


class ColumnParallelLinear(Module):
    """``y_r = x @ W_r.T + b_r``: this rank's ``out_features / N`` outputs (all of them if ``gather_output``)."""

    def __init__(self, weight, bias, group=None, gather_output=False):
        super().__init__()
        self.weight, self.bias = weight, bias
        self.group, self.gather_output = group, gather_output

    @classmethod
    def from_linear(cls, linear, group=None, gather_output=False):
        w = shard_of(linear.weight, 0, group, "ColwiseParallel(Linear) out_features")
        b = shard_of(linear.bias, 0, group, "ColwiseParallel(Linear) bias") if linear.bias is not None else None
        return cls(w, b, group, gather_output)

    def forward(self, x):
        y = F.linear(copy_to_parallel(x, self.group), self.weight, self.bias)
        return gather_from_parallel(y, self.group) if self.gather_output else y

    def extra_repr(self):
        return f"local weight {tuple(self.weight.shape)}, gather_output={self.gather_output}"


class RowParallelLinear(Module):
    """``y = sum_r x_r @ W_r.T + b``: input features split over ranks (``input_is_parallel``, else the
    replicated input is split here), output all-reduced, bias added once after the sum."""

    def __init__(self, weight, bias, group=None, input_is_parallel=True):
        super().__init__()
        self.weight, self.bias = weight, bias
        self.group, self.input_is_parallel = group, input_is_parallel

    @classmethod
    def from_linear(cls, linear, group=None, input_is_parallel=True, columns=None):
        w = shard_of(linear.weight, 1, group, "RowwiseParallel(Linear) in_features", columns)
        b = None
        if linear.bias is not None:
            b = Parameter(linear.bias.detach().clone())
            with no_grad():
                collectives.broadcast(b, src=(group.ranks[0] if group is not None else 0), group=group)
        return cls(w, b, group, input_is_parallel)

    def forward(self, x):
        if not self.input_is_parallel:
            x = scatter_to_parallel(x, self.group)
        y = reduce_from_parallel(F.linear(x, self.weight), self.group)
        return y if self.bias is None else y + self.bias

    def extra_repr(self):
        return f"local weight {tuple(self.weight.shape)}, input_is_parallel={self.input_is_parallel}"


class VocabParallelEmbedding(Module):
    """Rows ``[start, start + V/N)`` of the table on rank r; ids outside give zeros, and g sums the ranks."""

    def __init__(self, weight, num_embeddings, group=None):
        super().__init__()
        rank, n = group_rank_size(group)
        self.weight, self.group, self.num_embeddings = weight, group, num_embeddings
        self.start, self.stop = rank * weight.shape[0], (rank + 1) * weight.shape[0]

    @classmethod
    def from_embedding(cls, emb, group=None):
        if emb.padding_idx is not None:
            raise ArgumentError("RowwiseParallel(Embedding): padding_idx is not supported")
        return cls(shard_of(emb.weight, 0, group, "RowwiseParallel(Embedding) num_embeddings"), emb.num_embeddings,
                   group)

    def forward(self, ids):
        xp = ids.device.xp
        raw = ids.array
        if raw.size and (raw.min() < 0 or raw.max() >= self.num_embeddings):
            raise ArgumentError(f"VocabParallelEmbedding: ids must be in [0, {self.num_embeddings}), got "
                                f"[{int(raw.min())}, {int(raw.max())}]")
        inside = (raw >= self.start) & (raw < self.stop)
        local = type(ids)._make(xp.where(inside, raw - self.start, 0), ids.device)
        mask = type(ids)._make(inside[..., None].astype(self.weight.array.dtype), ids.device)
        return reduce_from_parallel(F.embedding(local, self.weight) * mask, self.group)

    def extra_repr(self):
        return f"rows [{self.start}, {self.stop}) of {self.num_embeddings}"


class TensorParallelAttention(Module):
    """Self-attention with ``num_heads / N`` heads per rank: q, k and v column-parallel by head, the output
    projection row-parallel. Same call as ``nn.MultiheadAttention`` (batch-first self-attention, bool masks)."""

    def __init__(self, in_proj_weight, in_proj_bias, out_proj, num_heads, group=None):
        super().__init__()
        self.in_proj_weight, self.in_proj_bias, self.out_proj = in_proj_weight, in_proj_bias, out_proj
        self.group, self.num_heads = group, num_heads
        self.head_dim = out_proj.weight.shape[0] // num_heads
        self.local_heads = num_heads // group_rank_size(group)[1]
        self.dropout = 0.0  # on the attention weights, in training mode (each rank draws for its heads)

    @classmethod
    def from_attention(cls, mha, group=None):
        _, n = group_rank_size(group)
        E, H = mha.embed_dim, mha.num_heads
        if H % n:
            raise ShapeError(f"HeadwiseParallel: {H} attention heads do not split evenly over {n} ranks")
        if mha.in_proj_weight is None or not mha.batch_first:
            raise ArgumentError("HeadwiseParallel: needs a batch-first MultiheadAttention with kdim == vdim == "
                                "embed_dim")
        qkv = [(0, E), (E, 2 * E), (2 * E, 3 * E)]  # each of q, k, v split by heads
        w = shard_of(mha.in_proj_weight, 0, group, "HeadwiseParallel in_proj_weight", qkv)
        b = shard_of(mha.in_proj_bias, 0, group, "HeadwiseParallel in_proj_bias", qkv) \
            if mha.in_proj_bias is not None else None
        layer = cls(w, b, RowParallelLinear.from_linear(mha.out_proj, group), H, group)
        layer.dropout = mha.dropout
        return layer

    def forward(self, query, key=None, value=None, key_padding_mask=None, need_weights=False, attn_mask=None,
                average_attn_weights=True, is_causal=False, kv_cache=None):
        if kv_cache is not None:
            raise ArgumentError("TensorParallelAttention: kv_cache (incremental decoding) is not supported under "
                                "tensor parallelism; gather the full model (state_dict) to generate")
        if (key is not None and key is not query) or (value is not None and value is not query):
            raise ArgumentError("TensorParallelAttention: only self-attention (key and value are the query)")
        if need_weights:
            raise ArgumentError("TensorParallelAttention: need_weights=True is not supported (each rank has "
                                "only its heads' weights)")
        if query.ndim != 3:
            raise ShapeError(f"TensorParallelAttention: query must be (N, L, E), got {tuple(query.shape)}")
        N, L, _ = query.shape
        Hl, D = self.local_heads, self.head_dim
        qkv = F.linear(copy_to_parallel(query, self.group), self.in_proj_weight, self.in_proj_bias)
        q, k, v = (t.reshape(N, L, Hl, D).transpose(1, 2) for t in qkv.split(Hl * D, dim=-1))
        keep, causal = _keep_mask(attn_mask, key_padding_mask, is_causal, N, L, query.device)
        p = self.dropout if self.training else 0.0
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, dropout_p=p, is_causal=causal)
        return self.out_proj(out.transpose(1, 2).reshape(N, L, Hl * D)), None

    def extra_repr(self):
        return f"heads {self.local_heads} of {self.num_heads}, head_dim={self.head_dim}"


def _keep_mask(attn_mask, key_padding_mask, is_causal, N, L, device):
    """MultiheadAttention's bool masks (True = masked out) as one keep-mask for scaled_dot_product_attention."""
    keep = None
    for m, shape in ((attn_mask, (L, L)), (key_padding_mask, (N, L))):
        if m is None:
            continue
        if m.dtype.name != "bool" or tuple(m.shape) != shape:
            raise ArgumentError(f"TensorParallelAttention: masks must be bool of shape {shape}, got "
                                f"{m.dtype.name} {tuple(m.shape)}")
        k = ~m if m is attn_mask else (~m).reshape(N, 1, 1, L)
        keep = k if keep is None else keep & k
    if keep is None:
        return None, bool(is_causal)
    if is_causal:
        keep = keep & ones(L, L, dtype="bool", device=device).tril()
    return keep, False
