"""Adadelta (Zeiler, 2012), as PyTorch::

    g = -grad if maximize else grad
    g = g + weight_decay * p
    v = rho * v + (1 - rho) * g^2                        square_avg
    delta = sqrt(u + eps) / sqrt(v + eps) * g            u: acc_delta, the running mean of squared updates
    u = rho * u + (1 - rho) * delta^2
    p = p - lr * delta

The step is in the units of the parameter (the ratio of two RMS values times g), so ``lr`` defaults to 1.
"""
from ..errors import ArgumentError
from .optimizer import Optimizer, axpy_, state_tensor


def adadelta_update(xp, p, g, square_avg, acc_delta, lr, rho, eps, weight_decay, maximize):
    """One Adadelta step on arrays, in place."""
    if maximize:
        g = xp.negative(g)
    if weight_decay != 0:
        g = p * weight_decay + g
    square_avg *= rho
    axpy_(xp, 1 - rho, xp.multiply(g, g), square_avg)
    std = square_avg + eps
    xp.sqrt(std, out=std)
    delta = acc_delta + eps
    xp.sqrt(delta, out=delta)
    delta /= std
    delta *= g
    acc_delta *= rho
    axpy_(xp, 1 - rho, xp.multiply(delta, delta, out=std), acc_delta)
    axpy_(xp, -lr, delta, p)


class Adadelta(Optimizer):
    """Adadelta. Defaults: lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, maximize=False.
    State: 'step', 'square_avg', 'acc_delta'."""

    kernels = {"default": adadelta_update}

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0, *, maximize=False):
        if lr < 0.0:
            raise ArgumentError(f"Invalid learning rate: {lr}")
        if not 0.0 <= rho <= 1.0:
            raise ArgumentError(f"Invalid rho value: {rho}")
        if eps < 0.0:
            raise ArgumentError(f"Invalid epsilon value: {eps}")
        if weight_decay < 0.0:
            raise ArgumentError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize)
        super().__init__(params, defaults)

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, rho, eps, wd, maximize = group["lr"], group["rho"], group["eps"], group["weight_decay"], \
                group["maximize"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["square_avg"] = state_tensor(p)
                    state["acc_delta"] = state_tensor(p)
                state["step"] += 1
                self._kernel(p.device)(p.device.xp, p.array, p.grad.array, state["square_avg"].array,
                                       state["acc_delta"].array, lr, rho, eps, wd, maximize)
                p._version_counter.bump()
        return loss
