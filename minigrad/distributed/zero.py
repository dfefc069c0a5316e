"""ZeroRedundancyOptimizer: ZeRO stage 1, each rank keeping the optimizer state of its shard only.

Every rank still holds all parameters and (after DDP) all averaged gradients, but the optimizer's state
(Adam's two moments: twice the parameters' memory) is split: rank r builds the wrapped optimizer over its
own shard of parameters, steps only those, then broadcasts each updated parameter from its owner. The
state per rank falls as 1/N; the price is one broadcast of the parameters per step.

Shards are assigned greedily (largest parameter first, to the rank holding the fewest elements so far), the
same on every rank. Deliberate differences from PyTorch: one parameter group; ``state_dict()`` is the local
shard's (``consolidate_state_dict`` is not offered).
"""
from ..errors import ArgumentError
from ..optim.optimizer import Optimizer
from . import collectives
from .process_group import _group

__all__ = ["ZeroRedundancyOptimizer"]


def partition(params, world_size):
    """[ranks' lists of parameter indices]: largest first, each to the least-loaded rank."""
    loads, shards = [0] * world_size, [[] for _ in range(world_size)]
    for i in sorted(range(len(params)), key=lambda i: (-params[i].numel(), i)):
        r = min(range(world_size), key=lambda r: (loads[r], r))
        shards[r].append(i)
        loads[r] += params[i].numel()
    return [sorted(s) for s in shards]


class ZeroRedundancyOptimizer(Optimizer):
    """``ZeroRedundancyOptimizer(params, optimizer_class=mg.optim.Adam, lr=...)``."""

    def __init__(self, params, optimizer_class, **defaults):
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ArgumentError("ZeroRedundancyOptimizer: only one parameter group is supported")
        g = _group()
        self.rank, self.world_size = g.rank, g.size
        self.all_params = list(self.param_groups[0]["params"])
        self.shards = partition(self.all_params, g.size)
        self.owner = {i: r for r, shard in enumerate(self.shards) for i in shard}
        mine = [self.all_params[i] for i in self.shards[self.rank]]
        self.optim = optimizer_class(mine, **defaults) if mine else None

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        if self.optim is not None:
            for key, value in self.param_groups[0].items():  # an LR scheduler changes our group
                if key != "params":
                    self.optim.param_groups[0][key] = value
            self.optim.step()
        works = [collectives.broadcast(p, self.owner[i], async_op=True) for i, p in enumerate(self.all_params)]
        for work in works:  # all in flight at once, waited for together
            work.wait()
        return loss

    def state_bytes(self):
        """Bytes of optimizer state this rank holds (what ZeRO divides by the world size)."""
        if self.optim is None:
            return 0
        return sum(v.array.nbytes for s in self.optim.state.values() for v in s.values() if hasattr(v, "array"))

    def state_dict(self):
        return self.optim.state_dict() if self.optim is not None else {"state": {}, "param_groups": []}

    def load_state_dict(self, state_dict):
        if self.optim is not None:
            self.optim.load_state_dict(state_dict)
