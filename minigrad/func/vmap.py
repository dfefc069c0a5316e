"""``vmap``: run a function written for one example on a whole batch, op by op (torch.func.vmap).

Each input mapped over (``in_dims``) becomes a ``BatchedTensor`` whose batch dim is moved first. While the
function runs, a forward wrapper (``autograd.extensions.forward_wrappers``, registered for this thread
only) sees every op: when an argument is batched it aligns the arguments' batch dims and calls the op's
batching rule (``rules.py``), which runs the op once on the physical tensors; an outside-apply wrapper does
the same for the core functions that make tensors without an op (comparisons, ``argmax``, ``detach``).
So ``vmap(f)(x)`` costs one op call per op of ``f``, not one per example, and gradients flow through the
physical graph. Levels: a ``vmap`` inside a ``vmap`` adds a second batch dim; each BatchedTensor knows
which levels it carries, and ops align tensors of different levels by broadcasting.

Limits (each raises ``VmapError`` naming the op or method): ops without a rule, reading values out
(``item``, ``numpy``, ``bool``: data-dependent control flow), in-place writes into a batched tensor,
``backward()`` on one (use ``minigrad.func.grad``), random ops unless ``randomness='different'``.
"""
import contextlib
import contextvars
import functools
import itertools

from ..autograd import extensions
from ..ops import shape as _sh
from ..tensor import Tensor
from . import rules, rules_nn  # noqa: F401  (rules_nn registers the nn ops' rules)
from ._batched import BatchedTensor, VmapError, physical_of, pop_level, push_level, wrap
from ._tree import broadcast_prefix, flatten, unflatten

_next_level = itertools.count(1)   # level numbers, unique in the process (next() is atomic)


def to_levels(x, levels, sizes):
    """The physical tensor of ``x`` with batch dims for every level in ``levels`` (sorted), broadcast
    (a view) where ``x`` does not vary along one."""
    have = x.levels if _is_batched(x) else ()
    p = physical_of(x)
    if have == tuple(levels):
        return p
    shape = tuple(p.shape[len(have):])
    lead = tuple(sizes[lv] if lv in have else 1 for lv in levels)
    return _sh.expand(_sh.reshape(p, lead + shape), tuple(sizes[lv] for lv in levels) + shape)


def _is_batched(x):
    return isinstance(x, BatchedTensor)


def _align(args, randomness):
    """Physical arguments with every batched one carrying all levels present, and the ``Batch``."""
    sizes = {}
    for a in args:
        if _is_batched(a):
            for lv, n in zip(a.levels, a.physical.shape):
                if sizes.setdefault(lv, n) != n:
                    raise VmapError(f"vmap: tensors of level {lv} disagree on the batch size ({sizes[lv]} != {n})")
    levels = tuple(sorted(sizes))
    batch_sizes = tuple(sizes[lv] for lv in levels)
    phys, batched, ndims = [], [], []
    for a in args:
        if _is_batched(a):
            phys.append(to_levels(a, levels, sizes))
            batched.append(True)
            ndims.append(a.ndim)
        else:
            phys.append(a)
            batched.append(False)
            ndims.append(a.ndim if isinstance(a, Tensor) else None)
    return phys, rules.Batch(batch_sizes, tuple(batched), tuple(ndims), randomness), levels


def _rewrap(out, levels):
    if isinstance(out, Tensor):
        return wrap(out, levels)
    if isinstance(out, tuple):
        items = [_rewrap(o, levels) for o in out]
        return type(out)(*items) if hasattr(out, "_fields") else tuple(items)
    return out


class _Session:
    """The wrappers of one thread's outermost vmap (inner levels reuse them)."""

    def __init__(self, randomness):
        self.randomness = randomness

    def forward(self, op, args, kwargs, run):
        if not any(type(a) is BatchedTensor for a in args):
            return run()
        phys, batch, levels = _align(args, self.randomness)
        return _rewrap(rules.rule_for(op)(op, phys, kwargs, batch), levels)

    def outside(self, fn, args, kwargs, run):
        if not any(type(a) is BatchedTensor for a in args) and \
                not any(type(v) is BatchedTensor for v in kwargs.values()):
            return run()
        rule = rules.outside_rule_for(fn)
        if rule is rules.passthrough:
            return run()
        kw_batched = [k for k, v in kwargs.items() if type(v) is BatchedTensor]
        if kw_batched:
            raise VmapError(f"vmap: {getattr(fn, '__name__', fn)}: pass the batched tensor "
                            f"{kw_batched[0]!r} positionally")
        phys, batch, levels = _align(args, self.randomness)
        return _rewrap(rule(fn, phys, kwargs, batch), levels)


_session = contextvars.ContextVar("minigrad.func.vmap_session", default=None)


@contextlib.contextmanager
def _level(randomness, size):
    outer = _session.get()
    if outer is not None and outer.randomness != randomness:
        outer = None   # an inner vmap with another randomness: its own wrappers, innermost wins
    level = next(_next_level)
    token = push_level(level, size)
    if outer is None:
        s = _Session(randomness)
        stoken = _session.set(s)
        fw = extensions.forward_wrappers.add(s.forward, f"vmap-level-{level}")
        ow = extensions.outside_apply_wrappers.add(s.outside, f"vmap-level-{level}")
    try:
        yield level
    finally:
        if outer is None:
            ow.remove()
            fw.remove()
            _session.reset(stoken)
        pop_level(token)


def _enter(x, dim, level, what):
    if dim is None:
        return x
    if not isinstance(x, Tensor):
        raise VmapError(f"vmap: {what}: in_dim={dim} for an input that is not a Tensor "
                        f"({type(x).__name__}); use None for it")
    nd = x.ndim
    if not -nd <= dim < nd:
        raise VmapError(f"vmap: {what}: in_dim={dim} is out of range for a tensor of shape {tuple(x.shape)}")
    dim %= nd
    levels = x.levels if _is_batched(x) else ()
    p = physical_of(x)
    k = len(levels)
    if dim:   # the new level's dim goes right after the outer levels' dims
        order = list(range(p.ndim))
        order.insert(k, order.pop(k + dim))
        p = _sh.permute(p, *order)
    return wrap(p, levels + (level,))


def _exit(y, dim, level, size, what):
    if not isinstance(y, Tensor):
        raise VmapError(f"vmap: {what}: the function must return tensors (or tuples/lists/dicts of tensors), "
                        f"got {type(y).__name__}")
    levels = y.levels if _is_batched(y) else ()
    p = physical_of(y)
    if dim is None:
        if level in levels:
            raise VmapError(f"vmap: {what}: out_dims=None for an output that differs per example")
        return y
    if level not in levels:   # an output that does not depend on the mapped inputs: broadcast it
        k = len(levels)
        p = _sh.expand(_sh.unsqueeze(p, k), p.shape[:k] + (size,) + p.shape[k:])
        levels = levels + (level,)
    i = levels.index(level)
    rest = levels[:i] + levels[i + 1:]
    nd = p.ndim - len(levels) + 1   # logical ndim of the result
    if not -nd <= dim < nd:
        raise VmapError(f"vmap: {what}: out_dim={dim} is out of range for a result with {nd} dims")
    target = len(rest) + dim % nd
    if target != i:
        order = list(range(p.ndim))
        order.insert(target, order.pop(i))
        p = _sh.permute(p, *order)
    return wrap(p, rest) if rest else p


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """``vmap(f, in_dims=0, out_dims=0)(*args)``: ``f`` applied to each slice of ``args`` along ``in_dims``
    (an int or None per argument, or nested like the arguments), results stacked along ``out_dims``.

    ``randomness``: 'error' (default: random ops raise), or 'different' (each example draws its own).
    ``chunk_size`` is accepted for torch.func compatibility; the batch always runs in one go.
    """
    if randomness not in ("error", "different"):
        raise ValueError(f"vmap: randomness must be 'error' or 'different', got {randomness!r} "
                         f"('same' is not supported)")

    @functools.wraps(func)
    def batched(*args, **kwargs):
        dims = broadcast_prefix(in_dims, args, "vmap: in_dims")
        leaves, spec = flatten(args)
        for i, (x, d) in enumerate(zip(leaves, dims)):
            if d is not None and (not isinstance(x, Tensor) or not -x.ndim <= d < x.ndim):
                raise VmapError(f"vmap: in_dim={d} for input {i}, " + (
                    f"which is not a tensor ({type(x).__name__}); use None for it" if not isinstance(x, Tensor)
                    else f"is out of range for a tensor of shape {tuple(x.shape)}"))
        sizes = {x.shape[d] for x, d in zip(leaves, dims) if d is not None}
        if not sizes:
            raise VmapError("vmap: at least one input must be mapped (a tensor with an in_dim that is not None)")
        if len(sizes) > 1:
            raise VmapError(f"vmap: expected all mapped inputs to have the same size in the mapped dim, got "
                            f"sizes {sorted(sizes)}")
        size = sizes.pop()
        with _level(randomness, size) as level:
            inner = [_enter(x, d, level, f"input {i}") for i, (x, d) in enumerate(zip(leaves, dims))]
            out = func(*unflatten(spec, inner), **kwargs)
            oleaves, ospec = flatten(out)
            odims = broadcast_prefix(out_dims, out, "vmap: out_dims")
            res = [_exit(y, d, level, size, f"output {i}") for i, (y, d) in enumerate(zip(oleaves, odims))]
        return unflatten(ospec, res)
    return batched
