"""Batching rules: how each op runs on a whole batch at once, keyed by op.

A rule gets the op, its positional arguments with every batched one replaced by its *physical* tensor
(batch dims first, one per active vmap level, all arguments aligned to the same levels), its keyword
options, and a ``Batch`` describing the batch; it returns the physical result (batch dims first).
``vmap.py`` calls ``rule_for(op)`` for every ``Function`` that sees a batched argument, and
``outside_rule_for(fn)`` for the core functions that make tensors without ``Function.apply``
(comparisons, ``argmax``, ``detach``...). An op without a rule raises ``VmapError`` naming it.

This file holds the registry and the rules of the elementwise, reduction, shape, indexing and
linear-algebra ops; ``rules_nn.py`` those of the nn ops (conv, pooling, norms, losses, attention).
"""
from ..ops import compare as _cmp, elementwise as _ew, indexing as _ix, linalg as _la, reduce as _red
from ..ops import pointwise as _pw, shape as _sh, shape_copy as _shc, transfer as _tr
from ..ops.nn import activation as _act
from ._batched import VmapError

_rules = {}          # op class -> rule(op, args, kwargs, batch)
_outside_rules = {}  # public core function -> rule(fn, args, kwargs, batch)


def register(*ops):
    """``@register(Add, Sub)`` makes the decorated function the batching rule of those ops."""
    def deco(rule):
        for op in ops:
            if op in _rules:
                raise ValueError(f"vmap: a batching rule for {op.name} is already registered")
            _rules[op] = rule
        return rule
    return deco


def register_outside(*fns):
    def deco(rule):
        for fn in fns:
            _outside_rules[fn] = rule
        return rule
    return deco


def passthrough(fn, args, kwargs, batch):
    """Marker rule: the function runs as is, on the batched tensors; the ops it applies are batched one by
    one (for outside-apply functions that only wrap an op, like ``max_pool2d`` for its indices)."""
    raise AssertionError("vmap calls the function itself for a passthrough rule")


def rule_for(op):
    rule = next((_rules[c] for c in op.__mro__ if c in _rules), None)   # Conv2d: _ConvNd's rule
    if rule is None:
        raise VmapError(f"vmap: there is no batching rule for the op '{op.name}' ({op.__module__}."
                        f"{op.__qualname__}); run it outside vmap, or loop over the batch")
    return rule


def outside_rule_for(fn):
    rule = _outside_rules.get(fn)
    if rule is None:
        name = getattr(fn, "__qualname__", repr(fn))
        raise VmapError(f"vmap: there is no batching rule for '{name}' (a function that makes tensors "
                        f"without an op); run it outside vmap, or loop over the batch")
    return rule


def registered_ops():
    """The ops and functions that have a batching rule (for docs and tests)."""
    return sorted({op.name for op in _rules} | {getattr(f, "__name__", "?") for f in _outside_rules})


class Batch:
    """What a rule knows about the batch: ``k`` leading batch dims of ``sizes``; per positional argument,
    whether it was batched and its logical (per-example) ndim (None for a non-tensor)."""
    __slots__ = ("k", "sizes", "batched", "ndims", "randomness")

    def __init__(self, sizes, batched, ndims, randomness):
        self.k, self.sizes, self.batched, self.ndims, self.randomness = len(sizes), sizes, batched, ndims, randomness

    def pad(self, p, i, want):
        """Argument ``i`` (physical ``p``) with size-1 dims inserted after the batch dims so that its
        logical ndim is ``want``; a plain argument is returned as is (NumPy aligns it from the right)."""
        have = self.ndims[i]
        if not self.batched[i] or have is None or have >= want:
            return p
        k = self.k
        return _sh.reshape(p, p.shape[:k] + (1,) * (want - have) + p.shape[k:])

    def full(self, p, i):
        """Argument ``i`` with the batch dims it must have: a plain tensor is broadcast over the batch."""
        if self.batched[i] or self.ndims[i] is None:
            return p
        return _sh.expand(_sh.reshape(p, (1,) * self.k + tuple(p.shape)), self.sizes + tuple(p.shape))

    def dim(self, d):
        """A (normalised, non-negative) logical dim, None or tuple of dims -> the physical one."""
        k = self.k
        if isinstance(d, tuple):
            return tuple(x + k for x in d)
        return d + k

    def all_dims(self, ndim):
        return tuple(range(self.k, self.k + ndim))

    def unflatten(self, p, lead):
        """Physical ``p`` whose first dim is batch x ``lead`` flattened back into ``sizes + lead``."""
        return _sh.reshape(p, self.sizes + tuple(lead) + tuple(p.shape[1:]))


def max_ndim(batch):
    return max((n for n in batch.ndims if n is not None), default=0)


# --- elementwise: pad batched arguments to the common logical ndim, then broadcast -------------------
@register(_ew.Add, _ew.Sub, _ew.Mul, _ew.Div, _ew.Pow, _ew.Maximum, _ew.Minimum, _ew.Where, _ew.Neg, _ew.Exp,
          _ew.Log, _ew.Sqrt, _ew.Abs, _ew.Sin, _ew.Cos, _ew.Clamp, _ew.Cast, _ew.Clone, _act.ReLU,
          _act.LeakyReLU, _act.GELU, _act.Sigmoid, _act.Tanh, _act.SiLU, _act.Erf, _ix.MaskedFill, _tr.ToDevice,
          _pw.Atan2)
def elementwise(op, args, kwargs, batch):
    n = max_ndim(batch)
    return op.apply(*(batch.pad(a, i, n) for i, a in enumerate(args)), **kwargs)


@register(_act.Dropout)
def dropout(op, args, kwargs, batch):
    if batch.randomness != "different":
        raise VmapError(f"vmap: dropout is random; pass randomness='different' to vmap to draw a different "
                        f"mask for each example (randomness={batch.randomness!r})")
    return op.apply(*args, **kwargs)


def _shift_dim(op, args, kwargs, batch):
    dim = kwargs.get("dim")
    kw = dict(kwargs, dim=batch.all_dims(batch.ndims[0]) if dim is None else batch.dim(dim))
    return op.apply(*args, **kw)


# reductions and softmax: ``dim`` (None: every logical dim) shifted past the batch dims
for _op in (_red.Sum, _red.Mean, _red.Var, _red.Amax, _red.LogSumExp, _red.Prod, _red.Cumsum, _act.Softmax,
            _act.LogSoftmax):
    register(_op)(_shift_dim)


# --- linear algebra ---------------------------------------------------------------------------------
def batched_matmul(a, a_nd, b, b_nd, batch, ia=0, ib=1):
    """Physical ``a @ b`` for logical ndims ``a_nd``, ``b_nd`` (1-D operands made 2-D and squeezed after,
    leading dims padded so NumPy's broadcast never pairs a batch dim with a logical one)."""
    k = batch.k
    if a_nd == 1:
        a = _sh.unsqueeze(a, -2) if batch.batched[ia] else a
    if b_nd == 1:
        b = _sh.unsqueeze(b, -1) if batch.batched[ib] else b
    an, bn = max(a_nd, 2) if batch.batched[ia] else a_nd, max(b_nd, 2) if batch.batched[ib] else b_nd
    n = max(an, bn)
    if batch.batched[ia] and an < n:
        a = _sh.reshape(a, a.shape[:k] + (1,) * (n - an) + a.shape[k:])
    if batch.batched[ib] and bn < n:
        b = _sh.reshape(b, b.shape[:k] + (1,) * (n - bn) + b.shape[k:])
    out = _la.MatMul.apply(a, b)
    if a_nd == 1 and batch.batched[ia]:
        out = _sh.squeeze(out, -2 if b_nd > 1 else -1)
    if b_nd == 1 and batch.batched[ib]:
        out = _sh.squeeze(out, -1)
    return out


@register(_la.MatMul)
def matmul(op, args, kwargs, batch):
    a, b = args
    return batched_matmul(a, batch.ndims[0], b, batch.ndims[1], batch)


@register(_la.Einsum)
def einsum(op, args, kwargs, batch):
    """Batched operands get the batch dims as fresh leading letters, and so does the output."""
    subs, output = kwargs["subs"], kwargs["output"]
    lead = "".join(c for c in _la.string.ascii_letters if c not in "".join(subs))[:batch.k]
    subs = tuple(lead + s if b else s for s, b in zip(subs, batch.batched))
    return op.apply(*args, subs=subs, output=lead + output)


# --- shape ------------------------------------------------------------------------------------------
@register(_sh.Reshape)
def reshape(op, args, kwargs, batch):
    return op.apply(args[0], shape=batch.sizes + tuple(kwargs["shape"]))


@register(_sh.Transpose)
def transpose(op, args, kwargs, batch):
    return op.apply(args[0], dim0=batch.dim(kwargs["dim0"]), dim1=batch.dim(kwargs["dim1"]))


@register(_sh.Permute)
def permute(op, args, kwargs, batch):
    return op.apply(args[0], dims=tuple(range(batch.k)) + batch.dim(tuple(kwargs["dims"])))


@register(_sh.Expand)
def expand(op, args, kwargs, batch):
    shape = tuple(kwargs["shape"])
    a = batch.pad(args[0], 0, len(shape))
    return op.apply(a, shape=batch.sizes + shape)


@register(_sh.Repeat)
def repeat(op, args, kwargs, batch):
    reps = tuple(kwargs["reps"])
    a = batch.pad(args[0], 0, len(reps))
    return op.apply(a, reps=(1,) * batch.k + reps)


@register(_sh.Cat, _sh.Stack)
def cat(op, args, kwargs, batch):
    return op.apply(*(batch.full(a, i) for i, a in enumerate(args)), dim=batch.dim(kwargs["dim"]))


@register(_sh.Pad)
def pad(op, args, kwargs, batch):
    return op.apply(args[0], widths=((0, 0),) * batch.k + tuple(kwargs["widths"]), value=kwargs["value"])


@register(_shc.Roll)
def roll(op, args, kwargs, batch):
    dims = kwargs["dims"]
    if dims is None:       # rolls each example's flattened elements
        a = args[0]
        flat = op.apply(_sh.reshape(a, batch.sizes + (-1,)), shifts=kwargs["shifts"], dims=batch.k)
        return _sh.reshape(flat, tuple(a.shape))
    return op.apply(args[0], shifts=kwargs["shifts"], dims=batch.dim(dims if isinstance(dims, int) else tuple(dims)))


@register(_sh.Flip)
def flip(op, args, kwargs, batch):
    return op.apply(args[0], dims=batch.dim(tuple(kwargs["dims"])))


@register(_sh.Tril)
def last_dims(op, args, kwargs, batch):
    return op.apply(*args, **kwargs)   # works on the last two dims: the batch dims ride along


@register(_ix.GetItem)
def getitem(op, args, kwargs, batch):
    index = kwargs["index"]
    index = index if isinstance(index, tuple) else (index,)
    return op.apply(args[0], index=(slice(None),) * batch.k + index)


@register(_ix.Gather)
def gather(op, args, kwargs, batch):
    a, index = batch.full(args[0], 0), batch.full(args[1], 1)
    return op.apply(a, index, dim=batch.dim(kwargs["dim"]))


# --- functions outside Function.apply (no gradient) ----------------------------------------------------
@register_outside(_cmp.lt, _cmp.le, _cmp.gt, _cmp.ge, _cmp.eq, _cmp.ne, _cmp.logical_and, _cmp.logical_or,
                  _cmp.logical_xor, _cmp.floor_divide, _cmp.remainder, _cmp.logical_not, _cmp.isnan,
                  _cmp.isinf, _cmp.isfinite, _cmp.sign, _ew.where, _cmp.isclose)
def outside_elementwise(fn, args, kwargs, batch):
    n = max_ndim(batch)
    return fn(*(batch.pad(a, i, n) for i, a in enumerate(args)), **kwargs)


@register_outside(_cmp.all, _cmp.any)
def outside_all_any(fn, args, kwargs, batch):
    a, dim = args[0], (args[1] if len(args) > 1 else kwargs.get("dim"))
    keepdim = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
    nd = batch.ndims[0]
    dim = batch.all_dims(nd) if dim is None else batch.dim(
        tuple(d % max(nd, 1) for d in dim) if isinstance(dim, tuple) else dim % max(nd, 1))
    return fn(a, dim, keepdim)


def _one_dim_call(fn, args, kwargs, batch):
    """argmax/argmin/max/min: dim None reduces the flattened example; an int dim is shifted."""
    a, dim = args[0], (args[1] if len(args) > 1 else kwargs.get("dim"))
    keepdim = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
    nd = batch.ndims[0]
    if dim is None:
        if keepdim:
            raise VmapError(f"vmap: {fn.__name__}(keepdim=True) without a dim is not batched; give a dim")
        return fn(_sh.reshape(a, batch.sizes + (-1,)), batch.k)
    return fn(a, batch.dim(dim % max(nd, 1)), keepdim)


@register_outside(_red.argmax, _red.argmin)
def outside_arg_reduce(fn, args, kwargs, batch):
    return _one_dim_call(fn, args, kwargs, batch)


@register_outside(_red.max, _red.min)
def outside_max_min(fn, args, kwargs, batch):
    other = args[1] if len(args) > 1 and hasattr(args[1], "shape") else kwargs.get("other")
    if other is not None:
        n = max_ndim(batch)
        return fn(batch.pad(args[0], 0, n), batch.pad(other, 1, n))
    if (args[1] if len(args) > 1 else kwargs.get("dim")) is None:
        return _red.amin(args[0], batch.all_dims(batch.ndims[0])) if fn is _red.min else \
            _red.amax(args[0], batch.all_dims(batch.ndims[0]))
    return _one_dim_call(fn, args, kwargs, batch)


@register_outside(_sh.view)
def outside_view(fn, args, kwargs, batch):
    shape = args[1:]
    if len(shape) == 1 and not isinstance(shape[0], (tuple, list, int)):
        return fn(args[0], shape[0])       # view(dtype): the same bytes per example
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    return _sh.reshape(args[0], batch.sizes + tuple(int(s) for s in shape))


@register_outside(_ix.one_hot)
def outside_same_call(fn, args, kwargs, batch):
    return fn(*args, **kwargs)


def _register_nn():
    from ..ops.nn import pool as _pool
    register_outside(_pool._max_pool)(passthrough)


_register_nn()


def _register_likes():
    from .. import creation as _cr
    from ..tensor_base import TensorBase
    register_outside(_cr.empty_like, _cr.zeros_like, _cr.ones_like, _cr.full_like, _cr.rand_like,
                     _cr.randn_like)(outside_like)
    register_outside(TensorBase.detach)(outside_same_call)


def outside_like(fn, args, kwargs, batch):
    if fn.__name__.startswith("rand") and batch.randomness != "different":
        raise VmapError(f"vmap: {fn.__name__} is random; pass randomness='different' to vmap")
    return fn(*args, **kwargs)


_register_likes()
