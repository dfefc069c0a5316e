"""FullyShardedDataParallel: ZeRO-3 (and ZeRO-2) — parameters, gradients and optimizer state split over ranks.

    fsdp = FullyShardedDataParallel(model, auto_wrap_policy=ModuleWrapPolicy({nn.TransformerBlock}))
    opt = mg.optim.Adam(fsdp.parameters())       # the float32 shards: 1/N of the parameters per rank

Each wrapped *unit* (every module the policy picks, plus the root) keeps its parameters as one flat shard
(``flat_param.py``). Its life in one step:

    forward   gather (all-gather the shards; prefetched by the unit before it) -> run -> free (FULL_SHARD)
    backward  gather again when its output's gradient arrives (prefetching the unit backward reaches next)
              -> the autograd graph reads the saved weights from it -> when every parameter's gradient is
              accumulated: reduce-scatter the flat gradient (its shard goes to ``flat_param.grad``) and free
    step      the optimizer updates the shards

While a unit is freed, the weights its ops saved for backward are kept as *slots* (offset, shape, strides)
by saved-tensor hooks and rebuilt from the regathered vector: freeing after forward really frees memory.
The root unit stays gathered from its forward to the end of backward (it is needed at both ends).
``ShardingStrategy.SHARD_GRAD_OP`` (ZeRO-2) keeps every unit gathered from forward to its backward.
``MixedPrecision(param_dtype=mg.float16)``: shards stay float32, the unit computes (and its gradients are
reduced) in float16. ``state_dict()`` gathers full float32 weights under the original names.
"""
import enum
import itertools
from collections import OrderedDict

import numpy as np

from ...autograd import engine
from ...autograd.extensions import saved_tensors_hooks
from ...autograd.grad_mode import is_grad_enabled, no_grad
from ...errors import ArgumentError, StateDictError
from ...nn.module import Module
from ...tensor import Tensor
from .. import collectives
from ..ddp import _check_same_shapes, _tensors
from ..process_group import ReduceOp, _group
from .flat_param import FlatParamUnit

__all__ = ["FullyShardedDataParallel", "ShardingStrategy", "MixedPrecision", "ModuleWrapPolicy"]
_instances = itertools.count(1)


class ShardingStrategy(enum.Enum):
    FULL_SHARD = 1      # ZeRO-3: parameters freed after forward and regathered for backward
    SHARD_GRAD_OP = 2   # ZeRO-2: parameters kept from forward to backward; gradients and state sharded


class MixedPrecision:
    """``param_dtype``: the dtype units compute in (shards stay in their own); ``reduce_dtype``: of the gradient
    reduce-scatter (default: param_dtype)."""

    def __init__(self, param_dtype=None, reduce_dtype=None, buffer_dtype=None):
        self.param_dtype = _np_dtype(param_dtype)
        self.reduce_dtype = _np_dtype(reduce_dtype) or self.param_dtype


def _np_dtype(d):
    return None if d is None else np.dtype(getattr(d, "name", d))


class ModuleWrapPolicy:
    """Make every submodule of one of ``module_classes`` its own FSDP unit."""

    def __init__(self, module_classes):
        self.classes = tuple(module_classes)

    def __call__(self, module):
        return isinstance(module, self.classes)


class _Slot:
    __slots__ = ("offset", "shape", "strides", "dtype")

    def __init__(self, offset, shape, strides, dtype):
        self.offset, self.shape, self.strides, self.dtype = offset, shape, strides, dtype


def _address(a):
    return a.data.ptr if hasattr(a.data, "ptr") else a.__array_interface__["data"][0]   # a CuPy or NumPy array


class FullyShardedDataParallel(Module):
    """``FullyShardedDataParallel(module, process_group=None, sharding_strategy=FULL_SHARD,
    mixed_precision=None, auto_wrap_policy=None, forward_prefetch=True, backward_prefetch=True,
    sync_module_states=True)``."""

    def __init__(self, module, process_group=None, sharding_strategy=ShardingStrategy.FULL_SHARD,
                 mixed_precision=None, auto_wrap_policy=None, forward_prefetch=True, backward_prefetch=True,
                 sync_module_states=True, _root=None, _names=None):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"FullyShardedDataParallel: module must be an nn.Module, got {type(module).__name__}")
        g = _group() if process_group is None else process_group
        self.process_group, self.strategy = process_group, ShardingStrategy(sharding_strategy)
        self.mixed_precision = mixed_precision or MixedPrecision()
        self.forward_prefetch, self.backward_prefetch = forward_prefetch, backward_prefetch
        self._root = _root
        if _root is None:
            named = [(n, p) for n, p in module.named_parameters()]
            _check_same_shapes(g, f"{g.world.prefix}{g.name}/fsdp{next(_instances)}", named,
                               "FullyShardedDataParallel")
            if sync_module_states:
                with no_grad():
                    for _, t in named + list(module.named_buffers()):
                        collectives.broadcast(t, g.ranks[0], group=process_group)
            _names = {(id(m), pn): (mn + "." if mn else "") + pn
                      for mn, m in module.named_modules() for pn, _ in m.named_parameters(recurse=False)}
            self._state_names = [((mn + "." if mn else "") + n, kind, m, n) for mn, m in module.named_modules()
                                 for kind, items in (("param", m.named_parameters(recurse=False)),
                                                     ("buffer", m.named_buffers(recurse=False))) for n, _ in items]
            if auto_wrap_policy is not None:
                policy = auto_wrap_policy if callable(auto_wrap_policy) else ModuleWrapPolicy(auto_wrap_policy)
                self._wrap(module, policy, _names)
        self.module = module
        entries = [(_names[(id(m), n)], m, n, p) for m, n, p in _own_params(module)]
        self._unit = FlatParamUnit(entries, g, self.mixed_precision.param_dtype) if entries else None
        if self._unit is not None:
            self.flat_param = self._unit.flat_param
        self._reshard = _root is not None and self.strategy is ShardingStrategy.FULL_SHARD
        self._pending = self._reduce = None   # (work, buffer) of a prefetched gather / a gradient reduce-scatter
        self._ready = 0
        self._in_backward = False
        if _root is None:
            self._units = [m for m in self.modules() if isinstance(m, FullyShardedDataParallel)]
            self._order, self._recorded = [], False
            self.timeline, self._backward_started = [], False

    def _wrap(self, module, policy, names):
        for name, child in list(module.named_children()):
            self._wrap(child, policy, names)
            if policy(child) and not isinstance(child, FullyShardedDataParallel):
                setattr(module, name, FullyShardedDataParallel(
                    child, self.process_group, self.strategy, self.mixed_precision, None, self.forward_prefetch,
                    self.backward_prefetch, False, _root=self, _names=names))

    @property
    def root(self):
        return self._root or self

    # --- gather / free with prefetch -----------------------------------------------------------------
    def _gather(self):
        u = self._unit
        if u is None or u.full is not None:
            return
        pending, self._pending = self._pending, None
        work, buf = pending or u.start_gather()
        work.wait()
        self.root._event("gather", self, work)
        u.use(buf, requires_grad=is_grad_enabled(), on_grad=self._on_grad)

    def _prefetch(self, unit):
        if unit is not None and unit._unit is not None and unit._unit.full is None and unit._pending is None:
            unit._pending = unit._unit.start_gather()

    def _neighbour(self, step):
        order = self.root._order
        if self not in order:
            return None
        i = order.index(self) + step
        return order[i] if 0 <= i < len(order) else None

    # --- forward ---------------------------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        root = self.root
        if self is root:
            self._recorded = self._recorded or bool(self._order)
            if not self._recorded:
                self._order = []
            self.timeline = []
            args = tuple(_cast(a, self.mixed_precision.param_dtype) for a in args)
        if not root._recorded:
            root._order.append(self)
        self._gather()
        if self.forward_prefetch and root._recorded:
            self._prefetch(self._neighbour(+1))
        if self._reshard and self._unit is not None and is_grad_enabled():
            with saved_tensors_hooks(self._pack_saved, self._unpack_saved):
                out = self.module(*args, **kwargs)
        else:
            out = self.module(*args, **kwargs)
        if self._unit is not None and (self._reshard or not is_grad_enabled()):
            self._unit.free()  # FULL_SHARD frees after forward; without a backward to come, every unit does
        for t in _tensors(out):
            if t.requires_grad:
                t.register_hook(self._pre_backward_hook)
        return out

    def _pack_saved(self, a):
        full = self._unit.full
        if full is None or a.size == 0 or any(s < 0 for s in a.strides):
            return a
        start, base = _address(a), _address(full)
        end = start + sum((n - 1) * s for n, s in zip(a.shape, a.strides)) + a.itemsize
        if not (base <= start and end <= base + full.nbytes):
            return a
        return _Slot(start - base, a.shape, a.strides, a.dtype)

    def _unpack_saved(self, x):
        if not isinstance(x, _Slot):
            return x
        full = self._unit.full
        if hasattr(full.data, "ptr"):  # CuPy
            return type(full)(x.shape, x.dtype, memptr=full.data + x.offset, strides=x.strides)
        return np.ndarray(x.shape, x.dtype, buffer=full, offset=x.offset, strides=x.strides)

    # --- backward --------------------------------------------------------------------------------------
    def _pre_backward_hook(self, grad):
        root = self.root
        if not root._backward_started:
            root._backward_started = True
            engine.queue_callback(root._finish_backward)
        if self._in_backward:
            return None
        self._in_backward = True
        self._gather()
        if self.backward_prefetch and self.strategy is ShardingStrategy.FULL_SHARD:
            self._prefetch(self._neighbour(-1))
        return None

    def _on_grad(self, leaf):
        self._ready += 1
        if self._ready == len(self._unit.leaves):
            self._post_backward()
        for u in self.root._units:  # MPI moves data only inside MPI calls: poke what is in flight
            for pending in (u._pending, u._reduce):
                if pending is not None:
                    pending[0].is_completed()

    def _post_backward(self):
        self._reduce = self._unit.reduce_scatter_grads(self.mixed_precision.reduce_dtype)
        self._unit.free()

    def _finish_backward(self):
        for u in self.root._units:
            if u._unit is not None and u._unit.leaves and u._reduce is None:
                u._post_backward()  # some parameter got no gradient: reduce what there is
            if u._reduce is not None:
                work, shard = u._reduce
                work.wait()
                self._event("reduce_scatter", u, work)
                u._unit.add_grad_shard(shard)
            if u._pending is not None:  # prefetched, never used
                u._pending[0].wait()
            if u._unit is not None:
                u._unit.release()
                u._unit.free()
            u._reduce = u._pending = None
            u._ready, u._in_backward = 0, False
        self._backward_started = False

    def _event(self, kind, unit, work):
        self.timeline.append({"kind": kind, "unit": self._units.index(unit), "issued": work.issued_at,
                              "completed": work.completed_at})

    # --- utilities -------------------------------------------------------------------------------------
    def clip_grad_norm_(self, max_norm, norm_type=2.0):
        """Clip the gradient norm of the whole (sharded) model: the shards' squared norms are all-reduced."""
        if float(norm_type) != 2.0:
            raise ArgumentError("FullyShardedDataParallel.clip_grad_norm_: only norm_type=2 is supported")
        grads = [p.grad for p in self.parameters() if p.grad is not None]
        xp = grads[0].device.xp if grads else np
        total = Tensor._make(xp.asarray([sum(float((g.array.astype(np.float64) ** 2).sum()) for g in grads)]),
                             grads[0].device if grads else self._device())
        collectives.all_reduce(total, op=ReduceOp.SUM, group=self.process_group)
        norm = float(total.array[0]) ** 0.5
        coef = float(max_norm) / (norm + 1e-6)
        if coef < 1:
            for g in grads:
                g.array *= coef
        return norm

    def state_dict(self, *args, **kwargs):
        """Full weights (gathered, the shards' dtype) and buffers under the wrapped module's own names."""
        if self._root is not None:
            raise ArgumentError("FullyShardedDataParallel.state_dict: call it on the root FSDP module")
        full = {}
        for u in self._units:
            if u._unit is not None:
                full.update(u._unit.full_weights())
        out = OrderedDict()
        for fqn, kind, m, n in self._state_names:
            out[fqn] = full[fqn] if kind == "param" else getattr(m, n).detach()
        return out

    def load_state_dict(self, state_dict, strict=True):
        names = {fqn for fqn, *_ in self._state_names}
        missing, unexpected = sorted(names - set(state_dict)), sorted(set(state_dict) - names)
        if strict and (missing or unexpected):
            raise StateDictError(f"FullyShardedDataParallel.load_state_dict: missing keys {missing}, unexpected "
                                 f"keys {unexpected}")
        arrays = {k: (v.array if isinstance(v, Tensor) else np.asarray(v)) for k, v in state_dict.items()}
        for u in self._units:
            if u._unit is not None:
                u._unit.load_full(arrays)
        with no_grad():
            for fqn, kind, m, n in self._state_names:
                if kind == "buffer" and fqn in arrays:
                    getattr(m, n).array[...] = arrays[fqn]
        return missing, unexpected

    def extra_repr(self):
        u = self._unit
        return "no parameters" if u is None else (f"{u.numel} parameters, shard {u.shard_size} of {u.padded}, "
                                                  f"{self.strategy.name}")


def _own_params(module):
    """(module, name, Parameter) for ``module``'s parameters outside nested FSDP units."""
    out = [(module, n, p) for n, p in module.named_parameters(recurse=False) if p is not None]
    for _, child in module.named_children():
        if not isinstance(child, FullyShardedDataParallel):
            out += _own_params(child)
    return out


def _cast(a, dtype):
    if dtype is None or not isinstance(a, Tensor) or a.array.dtype.kind != "f" or a.array.dtype == dtype:
        return a
    return a.to(dtype.name)
