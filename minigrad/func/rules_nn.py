"""Batching rules of the nn ops (``rules.py`` has the registry and the others).

Ops that take a batch of examples already (conv, pooling) get the vmap dims folded into their own batch
dim and unfolded after; ops whose weights are per-example (``linear`` with a batched weight) are computed
from batched matmuls; losses are computed per element (``reduction='none'``) and reduced over each
example's own dims, so a 'mean' never averages across the vmap batch.
"""
from ..ops import elementwise as _ew, reduce as _red, shape as _sh
from ..ops.nn import attention as _att, conv as _conv, embedding as _emb, flash_attention as _fa
from ..ops.nn import linear as _lin, loss as _loss, norm as _norm, pointwise_loss as _ploss, pool as _pool
from ..tensor_base import TensorBase
from ._batched import VmapError, raw
from .rules import batched_matmul, max_ndim, register


def _refuse_batched(op, batch, positions, what):
    for i in positions:
        if i < len(batch.batched) and batch.batched[i]:
            raise VmapError(f"vmap: {op.name}: a {what} that differs per example is not supported (only the "
                            f"input may be batched)")


@register(_lin.Linear)
def linear(op, args, kwargs, batch):
    x, w, b = args
    if not (batch.batched[1] or batch.batched[2]):
        return op.apply(x, w, b)
    wt = _sh.transpose(w, -1, -2)
    out = batched_matmul(x, batch.ndims[0], wt, 2, batch)
    if b is not None:
        out = _ew.add(out, batch.pad(b, 2, max(batch.ndims[0], 1)))
    return out


def _folded(op, batch, x, spatial, call):
    """Run ``call(x3)`` on ``x`` with the batch dims (and the logical N, if any) folded into one leading
    dim, then unfold: conv and pooling take (N, C, *spatial) and treat the N rows independently."""
    lead = x.shape[:x.ndim - spatial - 1]           # batch dims + logical N (if the example has one)
    folded = _sh.reshape(x, (-1,) + tuple(x.shape[x.ndim - spatial - 1:]))
    out = call(folded)
    return _sh.reshape(out, tuple(lead) + tuple(out.shape[1:]))


@register(_conv._ConvNd)
def conv(op, args, kwargs, batch):
    _refuse_batched(op, batch, (1, 2), "weight or bias")
    x, w, b = args
    return _folded(op, batch, x, op.nd, lambda x3: op.apply(x3, w, b, **kwargs))


@register(_pool._MaxPoolNd, _pool._AvgPoolNd, _pool.AdaptiveAvgPool2d)
def pool(op, args, kwargs, batch):
    if kwargs.get("indices_sink") is not None:
        raise VmapError(f"vmap: {op.name}: return_indices=True is not supported under vmap")
    spatial = len(kwargs["output_size"]) if "output_size" in kwargs else len(kwargs["kernel"])
    return _folded(op, batch, args[0], spatial, lambda x3: op.apply(x3, **kwargs))


@register(_norm.LayerNorm)
def layer_norm(op, args, kwargs, batch):
    _refuse_batched(op, batch, (1, 2), "weight or bias")
    return op.apply(*args, **kwargs)       # normalises the last dims: the batch dims ride along


@register(_norm.BatchNorm)
def batch_norm(op, args, kwargs, batch):
    raise VmapError("vmap: batch_norm has no batching rule: its statistics mix the examples of a batch "
                    "(use layer_norm or group statistics per example, or run it outside vmap)")


@register(_emb.Embedding)
def embedding(op, args, kwargs, batch):
    _refuse_batched(op, batch, (1,), "weight")
    return op.apply(*args, **kwargs)       # a lookup of any index shape


@register(_att.ScaledDotProductAttention, _fa.FlashAttention)
def attention(op, args, kwargs, batch):
    if kwargs.get("dropout_p"):
        raise VmapError(f"vmap: {op.name} with dropout_p > 0 is random; not supported under vmap")
    n = max_ndim(batch)
    padded = [batch.pad(a, i, n) if isinstance(a, TensorBase) else a for i, a in enumerate(args)]
    lead = padded[0].shape[:-2]
    if op is _fa.FlashAttention:   # tiles over (batch, heads, L, E): fold every leading dim into one
        flat = [a if not isinstance(a, TensorBase) else
                _sh.reshape(batch.full(a, i), (-1,) + tuple(a.shape[-2:])) if batch.batched[i] else a
                for i, a in enumerate(padded)]
        out = op.apply(*flat, **kwargs)
        return _sh.reshape(out, tuple(lead) + tuple(out.shape[-2:]))
    return op.apply(*padded, **kwargs)


# --- losses: per element, then each example's own mean or sum --------------------------------------
def _reduce_per_example(per, reduction, batch, denom=None):
    if reduction == "none":
        return per
    dims = tuple(range(batch.k, per.ndim))
    total = _red.sum(per, dims) if dims else per
    if reduction == "sum":
        return total
    if denom is None:
        n = 1
        for s in per.shape[batch.k:]:
            n *= s
        return _ew.div(total, float(n))
    return _ew.div(total, denom)


@register(_loss.MseLoss, _loss.BinaryCrossEntropyWithLogits, _ploss.SmoothL1Loss, _ploss.BinaryCrossEntropy)
def elementwise_loss(op, args, kwargs, batch):
    n = max_ndim(batch)
    padded = [batch.pad(a, i, n) if isinstance(a, TensorBase) else a for i, a in enumerate(args)]
    per = op.apply(*padded, **dict(kwargs, reduction="none"))
    return _reduce_per_example(per, kwargs["reduction"], batch)


@register(_loss.CrossEntropy, _loss.NllLoss)
def class_loss(op, args, kwargs, batch):
    _refuse_batched(op, batch, (2,), "class weight")
    x, target, weight = batch.full(args[0], 0), batch.full(args[1], 1), args[2]
    k, xnd = batch.k, batch.ndims[0]
    C = x.shape[k + (1 if xnd > 1 else 0)]
    index_targets = raw(target).dtype.kind in "iu"
    # (batch..., [N,] C, d...) -> (batch*[N], C, d...): the op's own N absorbs the vmap dims
    xs = _sh.reshape(x, (-1,) + tuple(x.shape[k + (1 if xnd > 1 else 0):]))
    ts = _sh.reshape(target, (-1,) + tuple(target.shape[k + (1 if xnd > 1 else 0):]))
    per = op.apply(xs, ts, weight, **dict(kwargs, reduction="none"))
    per_shape = tuple(target.shape) if index_targets else \
        tuple(x.shape[:k + (1 if xnd > 1 else 0)]) + tuple(x.shape[k + (2 if xnd > 1 else 1):])
    per = _sh.reshape(per, per_shape)
    denom = None
    if kwargs["reduction"] == "mean" and index_targets:
        t = raw(target)
        xp = x.device.xp
        valid = t != kwargs["ignore_index"]
        w = (raw(weight)[xp.where(valid, t, 0) % C] * valid) if weight is not None else valid
        dims = tuple(range(k, t.ndim))
        denom = TensorBase._make(xp.asarray(w.sum(axis=dims) if dims else w, dtype=raw(per).dtype), x.device)
    return _reduce_per_example(per, kwargs["reduction"], batch, denom)
