"""RMSprop, as PyTorch::

    g = -grad if maximize else grad
    g = g + weight_decay * p
    s = alpha * s + (1 - alpha) * g^2
    avg = sqrt(s - ga^2) + eps, ga = alpha * ga + (1 - alpha) * g   (centered)   else sqrt(s) + eps
    buf = momentum * buf + g / avg;  p = p - lr * buf                (momentum > 0)
    p = p - lr * g / avg                                             (otherwise)
"""
from ..errors import ArgumentError
from .optimizer import Optimizer, axpy_, state_tensor


def rmsprop_update(xp, p, g, square_avg, grad_avg, buf, lr, alpha, eps, weight_decay, momentum, maximize):
    """One RMSprop step on arrays, in place. ``grad_avg`` (centered) and ``buf`` (momentum) may be None."""
    if maximize:
        g = xp.negative(g)
    if weight_decay != 0:
        g = p * weight_decay + g
    tmp = xp.multiply(g, g)                         # the one full-size temporary
    square_avg *= alpha
    axpy_(xp, 1 - alpha, tmp, square_avg)
    if grad_avg is not None:
        grad_avg *= alpha
        axpy_(xp, 1 - alpha, g, grad_avg)
        xp.multiply(grad_avg, grad_avg, out=tmp)
        xp.subtract(square_avg, tmp, out=tmp)
        xp.sqrt(tmp, out=tmp)
    else:
        xp.sqrt(square_avg, out=tmp)
    tmp += eps
    xp.divide(g, tmp, out=tmp)                      # g / avg
    if buf is not None:
        buf *= momentum
        buf += tmp
        axpy_(xp, -lr, buf, p)
    else:
        axpy_(xp, -lr, tmp, p)


class RMSprop(Optimizer):
    """RMSprop (Hinton). Defaults: lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
    centered=False, maximize=False. State: 'step', 'square_avg', 'momentum_buffer' (momentum > 0),
    'grad_avg' (centered)."""

    kernels = {"default": rmsprop_update}

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False, *,
                 maximize=False):
        if lr < 0.0:
            raise ArgumentError(f"Invalid learning rate: {lr}")
        if eps < 0.0:
            raise ArgumentError(f"Invalid epsilon value: {eps}")
        if momentum < 0.0:
            raise ArgumentError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ArgumentError(f"Invalid weight_decay value: {weight_decay}")
        if alpha < 0.0:
            raise ArgumentError(f"Invalid alpha value: {alpha}")
        defaults = dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                        centered=centered, maximize=maximize)
        super().__init__(params, defaults)

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, alpha, eps, wd = group["lr"], group["alpha"], group["eps"], group["weight_decay"]
            momentum, centered, maximize = group["momentum"], group["centered"], group["maximize"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["square_avg"] = state_tensor(p)
                if momentum > 0 and "momentum_buffer" not in state:
                    state["momentum_buffer"] = state_tensor(p)
                if centered and "grad_avg" not in state:
                    state["grad_avg"] = state_tensor(p)
                state["step"] += 1
                ga = state["grad_avg"].array if centered else None
                buf = state["momentum_buffer"].array if momentum > 0 else None
                self._kernel(p.device)(p.device.xp, p.array, p.grad.array, state["square_avg"].array, ga, buf,
                                       lr, alpha, eps, wd, momentum, maximize)
                p._version_counter.bump()
        return loss
