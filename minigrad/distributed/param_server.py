"""A parameter server over point-to-point messages: the design data parallelism had before the ring.

    ps = ParameterServer(model, optimizer if rank == server else None, server=0)
    loss.backward(); ps.step()         # instead of DDP + optimizer.step()

Each step every worker *pushes* its flattened gradients to the server rank (``isend``); the server sums
them with its own, averages, runs the optimizer, and every worker *pulls* the new parameters back. The
result is DDP's (the same average, the same update), but the traffic is not spread out: with S bytes of
parameters and N ranks the server receives and sends (N-1)·S per step, where each rank of a ring
all-reduce sends 2(N-1)/N·S. The server's link is the bottleneck, and it grows with N. The bytes are in
``dist.comm_stats()`` / ``dist.comm_log()``.
"""
from ..autograd.grad_mode import no_grad
from ..errors import ArgumentError
from ..tensor import Tensor
from . import collectives
from .process_group import _group

__all__ = ["ParameterServer"]


class ParameterServer:
    """``ParameterServer(model, optimizer=None, server=0, group=None)``: ``optimizer`` only on the server."""

    def __init__(self, model, optimizer=None, server=0, group=None):
        g = _group() if group is None else group
        if server not in g.ranks:
            raise ArgumentError(f"ParameterServer: server={server} is not a rank of the group {g.ranks}")
        self.group, self.server, self.g = group, server, g
        self.is_server = g.global_rank == server
        if self.is_server and optimizer is None:
            raise ArgumentError("ParameterServer: the server rank needs the optimizer")
        self.params, self.optimizer = list(model.parameters()), optimizer
        p0 = self.params[0]
        self.xp, self.device, self.dtype = p0.device.xp, p0.device, p0.array.dtype
        with no_grad():  # everyone starts from the server's parameters
            flat = self._flat(lambda p: p.array)
            collectives.broadcast(flat, server, group=group)
            self._unflat(flat, lambda p, a: p.array.__setitem__(..., a))

    def _flat(self, get):
        return Tensor._make(self.xp.concatenate([get(p).reshape(-1) for p in self.params]).astype(self.dtype),
                            self.device)

    def _unflat(self, flat, put):
        offset = 0
        for p in self.params:
            put(p, flat.array[offset:offset + p.numel()].reshape(p.shape))
            offset += p.numel()

    def step(self):
        """Push gradients, let the server average and update, pull parameters."""
        grads = self._flat(lambda p: p.grad.array if p.grad is not None else self.xp.zeros(p.shape, self.dtype))
        workers = [r for r in self.g.ranks if r != self.server]
        with no_grad():
            if not self.is_server:
                collectives.send(grads, self.server, group=self.group)
                params = Tensor._make(self.xp.empty_like(grads.array), self.device)
                collectives.recv(params, self.server, group=self.group)
                self._unflat(params, lambda p, a: p.array.__setitem__(..., a))
                return
            total = grads.array.copy()
            buf = Tensor._make(self.xp.empty_like(total), self.device)
            for r in workers:
                collectives.recv(buf, r, group=self.group)
                total += buf.array
            self._unflat(Tensor._make(total / self.g.size, self.device),
                         lambda p, a: setattr(p, "grad", Tensor._make(a.copy(), self.device)))
            self.optimizer.step()
            params = self._flat(lambda p: p.array)
            sends = [collectives.isend(params, r, group=self.group) for r in workers]
            for w in sends:
                w.wait()
