"""Adam and AdamW, as PyTorch::

    g = -grad if maximize else grad
    Adam:  g = g + weight_decay * p          AdamW:  p = p * (1 - lr * weight_decay)
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g^2
    v_max = max(v_max, v)                    (amsgrad; v_max replaces v below)
    p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
"""
import math

from ..errors import ArgumentError
from ..tensor import Tensor
from .optimizer import Optimizer, state_tensor


def adam_update(xp, p, g, m, v, v_max, step, lr, beta1, beta2, eps, weight_decay, decoupled, maximize):
    """One Adam/AdamW step on arrays, in place. ``m``, ``v`` (and ``v_max`` with amsgrad, else None) are
    the moment buffers; ``step`` the step count after this step (1 on the first); ``decoupled``: AdamW."""
    if maximize:
        g = xp.negative(g)
    if weight_decay != 0:
        if decoupled:
            p *= 1 - lr * weight_decay
        else:
            g = p * weight_decay + g
    # one full-size temporary serves every product (axpy_ would make a second one for a * x)
    tmp = xp.multiply(g, 1 - beta1)
    m *= beta1
    m += tmp
    xp.multiply(g, g, out=tmp)
    tmp *= 1 - beta2
    v *= beta2
    v += tmp
    if v_max is not None:
        xp.maximum(v_max, v, out=v_max)
        v = v_max
    bias_correction1 = 1 - beta1 ** step
    bias_correction2_sqrt = math.sqrt(1 - beta2 ** step)
    xp.sqrt(v, out=tmp)
    tmp /= bias_correction2_sqrt
    tmp += eps
    xp.divide(m, tmp, out=tmp)
    tmp *= -lr / bias_correction1
    p += tmp


def adam_update_fused(xp, p, g, m, v, v_max, step, lr, beta1, beta2, eps, weight_decay, decoupled, maximize):
    """The same step as ``adam_update`` in one CuPy kernel launch (GPU only; AMSGrad/maximize fall back)."""
    if v_max is not None or maximize or p.dtype.itemsize < 4:     # float16 parameters: the plain path
        return adam_update(xp, p, g, m, v, v_max, step, lr, beta1, beta2, eps, weight_decay, decoupled,
                           maximize)
    from ..backend import cuda_kernels  # imported only where CuPy runs
    cuda_kernels.adam_(p, g, m, v, lr, beta1, beta2, eps, weight_decay, step, decoupled)


class Adam(Optimizer):
    """Adam (Kingma & Ba) with L2 ``weight_decay`` added to the gradient, optional AMSGrad.

    Defaults: lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, maximize=False.
    State per parameter: 'step' (int), 'exp_avg', 'exp_avg_sq' (and 'max_exp_avg_sq' with amsgrad).
    """

    kernels = {"default": adam_update, "fused": adam_update_fused}
    _decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, *,
                 maximize=False):
        if lr < 0.0:
            raise ArgumentError(f"Invalid learning rate: {lr}")
        if eps < 0.0:
            raise ArgumentError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ArgumentError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ArgumentError(f"Invalid beta parameter at index 1: {betas[1]}")
        if weight_decay < 0.0:
            raise ArgumentError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize)
        super().__init__(params, defaults)

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        decoupled = self._decoupled
        for group in self.param_groups:
            lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
            wd, amsgrad, maximize = group["weight_decay"], group["amsgrad"], group["maximize"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = state_tensor(p)
                    state["exp_avg_sq"] = state_tensor(p)
                    if amsgrad:
                        state["max_exp_avg_sq"] = state_tensor(p)
                state["step"] += 1
                v_max = state.get("max_exp_avg_sq") if amsgrad else None
                if amsgrad and v_max is None:
                    v_max = state["max_exp_avg_sq"] = state_tensor(p)
                self._kernel(p.device)(p.device.xp, p.array, p.grad.array, state["exp_avg"].array,
                                       state["exp_avg_sq"].array, None if v_max is None else v_max.array,
                                       state["step"], lr, beta1, beta2, eps, wd, decoupled, maximize)
                p._version_counter.bump()
        return loss


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter): ``p *= 1 - lr * weight_decay`` before the
    Adam update. Defaults as Adam but weight_decay=1e-2."""

    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize)
