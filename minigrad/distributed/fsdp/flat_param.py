"""One FSDP unit's parameters as one flat, padded vector split over ranks — and the three moves on it.

    layout   the unit's parameters, flattened one after another: T elements, padded to P = N * ceil(T/N)
    shard    rank r keeps elements [r*S, (r+1)*S) (S = P/N) as a float32 Parameter: what the optimizer steps
    gather   all-gather the shards into the full vector (cast to the compute dtype first); each parameter
             becomes a leaf tensor viewing its slice of it, set on its module where the Parameter was
    free     drop the full vector (the leaves keep zero-size storage, so the memory really goes)
    reduce   flatten the leaves' gradients into one padded vector and reduce-scatter it (average): rank r
             gets the gradient of its shard

Every buffer comes from the device's backend (``empty``), so the memory pool counts it: the per-rank memory
the lecture and the benchmark measure is the real thing. ``gather``, ``free`` and ``reduce_scatter_grads`` are small and separate on purpose: an assignment can ask for
exactly these. The collectives are issued through minigrad.distributed, so the group's communication log
records them (which, how many bytes, in which order).
"""
import numpy as np

from ...autograd.grad_mode import no_grad
from ...backend.device import get_backend
from ...nn.parameter import Parameter
from ...tensor import Tensor
from .. import collectives
from ..process_group import ReduceOp

__all__ = ["FlatParamUnit"]


class FlatParamUnit:
    """``FlatParamUnit(entries, group, compute_dtype)``: ``entries`` are (fqn, module, attribute name, Parameter)
    for the unit's parameters. The Parameters are removed from their modules; ``flat_param`` holds the shard."""

    def __init__(self, entries, group, compute_dtype=None):
        self.group = group
        self.rank, self.world = group.rank, group.size
        first = entries[0][3]
        self.device, self.dtype = first.device, first.array.dtype
        self.compute_dtype = np.dtype(compute_dtype) if compute_dtype is not None else self.dtype
        self.layout, offset = [], 0     # (fqn, module, name, shape, offset, numel)
        for fqn, module, name, p in entries:
            self.layout.append((fqn, module, name, tuple(p.shape), offset, p.numel()))
            offset += p.numel()
        self.numel = offset
        self.shard_size = -(-offset // self.world)
        self.padded = self.shard_size * self.world
        self.backend = get_backend(self.device)
        full = self.device.xp.zeros(self.padded, self.dtype)
        for (_, module, name, shape, off, n), (_, _, _, p) in zip(self.layout, entries):
            full[off:off + n] = p.array.reshape(-1)
            delattr(module, name)
        lo = self.rank * self.shard_size
        self.flat_param = Parameter(Tensor._make(self._empty(self.shard_size, self.dtype), self.device))
        self.flat_param.array[...] = full[lo:lo + self.shard_size]
        self.full = None        # the gathered vector, while it exists
        self.leaves = []        # the leaf tensors set on the modules (kept alive until backward is done)

    def _empty(self, n, dtype, fill=None):
        a = self.backend.empty((n,), np.dtype(dtype))
        if fill is not None:
            a[...] = fill
        return a

    # --- gather / free -------------------------------------------------------------------------------
    def start_gather(self):
        """Issue the all-gather of the full vector (compute dtype); returns (work, buffer)."""
        shard = self._empty(self.shard_size, self.compute_dtype, self.flat_param.array)  # cast to compute dtype
        buf = self._empty(self.padded, self.compute_dtype)
        work = collectives.all_gather_into_tensor(Tensor._make(buf, self.device), Tensor._make(shard, self.device),
                                                  group=self.group, async_op=True)
        return work, buf

    def use(self, buf, requires_grad, on_grad=None):
        """Make ``buf`` the full vector: point each parameter's leaf at its slice (new leaves unless they are
        still held for a backward, which then only get their storage back)."""
        self.full = buf
        if self.leaves:
            for leaf, (_, _, _, shape, off, n) in zip(self.leaves, self.layout):
                leaf.array = buf[off:off + n].reshape(shape)
            return
        for _, module, name, shape, off, n in self.layout:
            leaf = Tensor._make(buf[off:off + n].reshape(shape), self.device)
            if requires_grad:
                leaf.requires_grad_(True)
                if on_grad is not None:
                    leaf.register_post_accumulate_grad_hook(on_grad)
                self.leaves.append(leaf)
            setattr(module, name, leaf)

    def free(self):
        """Drop the full vector; the leaves (held for backward) keep zero-size storage."""
        xp = self.device.xp
        self.full = None
        for leaf in self.leaves:
            leaf.array = xp.empty(0, self.compute_dtype)
        if not self.leaves:  # no backward to come (no_grad): nothing to keep at all
            for _, module, name, _, _, _ in self.layout:
                setattr(module, name, None)

    def release(self):
        """After backward: forget the leaves (their gradients were reduce-scattered)."""
        self.leaves = []

    # --- gradients -------------------------------------------------------------------------------------
    def reduce_scatter_grads(self, reduce_dtype=None):
        """Flatten the leaves' gradients (zeros where one got none), free them, and start the averaging
        reduce-scatter; returns (work, shard buffer)."""
        dtype = np.dtype(reduce_dtype) if reduce_dtype is not None else self.compute_dtype
        flat = self._empty(self.padded, dtype, 0)
        for leaf, (_, _, _, _, off, n) in zip(self.leaves, self.layout):
            if leaf.grad is not None:
                flat[off:off + n] = leaf.grad.array.reshape(-1)
                leaf.grad = None
        out = self._empty(self.shard_size, dtype)
        work = collectives.reduce_scatter_tensor(Tensor._make(out, self.device), Tensor._make(flat, self.device),
                                                 op=ReduceOp.AVG, group=self.group, async_op=True)
        return work, out

    def add_grad_shard(self, shard):
        """Accumulate a reduced gradient shard into ``flat_param.grad`` (in the shard's dtype: float32)."""
        p = self.flat_param
        if p.grad is None and shard.dtype == self.dtype:
            p.grad = Tensor._make(shard, self.device)  # the reduce-scatter's output itself: no copy
        elif p.grad is None:
            p.grad = Tensor._make(self._empty(self.shard_size, self.dtype, shard), self.device)
        else:
            p.grad.array += shard

    # --- full weights (state_dict) ---------------------------------------------------------------------
    def full_weights(self):
        """{fqn: a full copy of the parameter (the shard's dtype)}: one blocking all-gather of the shards."""
        xp = self.device.xp
        buf = self._empty(self.padded, self.dtype)
        with no_grad():
            collectives.all_gather_into_tensor(Tensor._make(buf, self.device),
                                               Tensor._make(xp.ascontiguousarray(self.flat_param.array), self.device),
                                               group=self.group)
        return {fqn: Tensor._make(buf[off:off + n].reshape(shape).copy(), self.device)
                for fqn, _, _, shape, off, n in self.layout}

    def load_full(self, arrays):
        """Take this rank's shard from full parameters ``{fqn: array}``."""
        xp = self.device.xp
        full = xp.zeros(self.padded, self.dtype)
        for fqn, _, _, shape, off, n in self.layout:
            full[off:off + n] = xp.asarray(arrays[fqn], dtype=self.dtype).reshape(-1)
        lo = self.rank * self.shard_size
        self.flat_param.array[...] = full[lo:lo + self.shard_size]
