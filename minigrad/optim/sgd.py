"""SGD with momentum, dampening, Nesterov momentum, weight decay (L2) and maximize, as PyTorch::

    g = -grad if maximize else grad
    g = g + weight_decay * p
    buf = g                                     (first step)
    buf = momentum * buf + (1 - dampening) * g  (later steps)
    g = g + momentum * buf if nesterov else buf (when momentum != 0)
    p = p - lr * g
"""
from ..errors import ArgumentError
from ..tensor import Tensor
from .optimizer import Optimizer, axpy_


def sgd_update(xp, p, g, buf, lr, momentum, dampening, nesterov, weight_decay, maximize):
    """One SGD step on arrays, in place: ``p`` (parameter), ``g`` (gradient, left untouched), ``buf``
    (momentum buffer or None on the first step). Returns the momentum buffer (None without momentum)."""
    own = False                        # whether ``d`` is a temporary we may overwrite
    if weight_decay != 0:
        d = xp.multiply(p, weight_decay)
        if maximize:
            d -= g
        else:
            d += g
        own = True
    elif maximize:
        d = xp.negative(g)
        own = True
    else:
        d = g
    if momentum != 0:
        if buf is None:
            buf = d if own else d.copy()       # PyTorch: clone(d)
        else:
            buf *= momentum
            axpy_(xp, 1 - dampening, d, buf)
        if nesterov:
            axpy_(xp, -lr * momentum, buf, p)   # p -= lr * (d + momentum * buf)
        else:
            d = buf
    axpy_(xp, -lr, d, p)
    return buf


def sgd_update_fused(xp, p, g, buf, lr, momentum, dampening, nesterov, weight_decay, maximize):
    """The same step as ``sgd_update`` in one CuPy kernel launch (GPU only)."""
    if maximize or p.dtype.itemsize < 4:     # float16 parameters take the plain path
        return sgd_update(xp, p, g, buf, lr, momentum, dampening, nesterov, weight_decay, maximize)
    from ..backend import cuda_kernels  # imported only where CuPy runs
    return cuda_kernels.sgd_(p, g, buf, lr, momentum, dampening, weight_decay, nesterov)


class SGD(Optimizer):
    """Stochastic gradient descent (PyTorch's formulas; defaults lr=1e-3, momentum=0, dampening=0,
    weight_decay=0, nesterov=False, maximize=False). State per parameter: 'momentum_buffer'."""

    kernels = {"default": sgd_update, "fused": sgd_update_fused}

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, *,
                 maximize=False):
        if lr < 0.0:
            raise ArgumentError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ArgumentError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ArgumentError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ArgumentError("Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize)
        super().__init__(params, defaults)

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, momentum, dampening = group["lr"], group["momentum"], group["dampening"]
            nesterov, wd, maximize = group["nesterov"], group["weight_decay"], group["maximize"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                buf_t = state.get("momentum_buffer")
                buf = self._kernel(p.device)(p.device.xp, p.array, p.grad.array,
                                             None if buf_t is None else buf_t.array,
                                             lr, momentum, dampening, nesterov, wd, maximize)
                if momentum != 0 and buf_t is None:
                    state["momentum_buffer"] = Tensor._make(buf, p.device)
                p._version_counter.bump()
        return loss
