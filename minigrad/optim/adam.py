"""Adam and AdamW, as PyTorch::

    g = -grad if maximize else grad
    Adam:  g = g + weight_decay * p          AdamW:  p = p * (1 - lr * weight_decay)
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g^2
    v_max = max(v_max, v)                    (amsgrad; v_max replaces v below)
    p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
"""
import functools
import math

from ..backend import dtypes
from ..backend.device import get_backend
from ..backend.dtypes import np_dtype
from ..errors import ArgumentError
from ..tensor import Tensor
from .optimizer import Optimizer, state_tensor


CHUNK = 1 << 15     # elements per piece of the update: its temporaries are a few cache-sized buffers


def adam_update(xp, p, g, m, v, v_max, step, lr, beta1, beta2, eps, weight_decay, decoupled, maximize):
    """One Adam/AdamW step on arrays, in place. ``m``, ``v`` (and ``v_max`` with amsgrad, else None) are
    the moment buffers; ``step`` the step count after this step (1 on the first); ``decoupled``: AdamW.

    No temporary the size of the parameter: the update runs over pieces of ``CHUNK`` elements, each with
    a few work buffers of that size (what a fused GPU kernel keeps in registers). Moments held in
    bfloat16 (``bf16_state``) are read into float32, updated there and written back with stochastic
    rounding (below)."""
    n = p.size
    low = m.dtype != p.dtype
    work = [xp.empty(min(n, CHUNK), dtype=p.dtype) for _ in range(4 if low else 2)]
    flat = [a.reshape(-1) for a in (p, g, m, v, v_max) if a is not None]
    rng = Noise(xp, p, step) if low else None
    for lo in range(0, n, CHUNK):
        hi = min(lo + CHUNK, n)
        views = [a[lo:hi] for a in flat]
        _adam_piece(xp, *views[:4], views[4] if len(views) > 4 else None, [w[:hi - lo] for w in work], rng,
                    step, lr, beta1, beta2, eps, weight_decay, decoupled, maximize)


def _adam_piece(xp, p, g, m, v, v_max, work, rng, step, lr, beta1, beta2, eps, weight_decay, decoupled,
                maximize):
    t, u = work[0], work[1]
    if maximize:
        g = xp.negative(g, out=u)
    if weight_decay != 0:
        if decoupled:
            p *= 1 - lr * weight_decay
        else:
            g = xp.add(xp.multiply(p, weight_decay, out=t), g, out=t)
    ms, vs = m, v
    if rng is not None:                                   # bfloat16 moments: float32 copies to work on
        m, v = work[2], work[3]
        m[...] = ms
        v[...] = vs
    m -= g                                                # m = beta1 * m + (1 - beta1) * g, in place
    m *= beta1
    m += g
    xp.multiply(g, g, out=u)
    u *= 1 - beta2
    v *= beta2
    v += u
    if v_max is not None:
        xp.maximum(v_max, v, out=v_max)
        v = v_max
    xp.sqrt(v, out=u)
    u /= math.sqrt(1 - beta2 ** step)
    u += eps
    xp.divide(m, u, out=u)
    u *= -lr / (1 - beta1 ** step)
    p += u
    if rng is not None:                                   # last: rounding overwrites the float32 copies
        round_stochastic(xp, m, ms, rng)
        round_stochastic(xp, v, vs, rng)


def round_stochastic(xp, x, out, noise):
    """float32 ``x`` -> bfloat16 ``out``, rounded up with probability (the part cut off) / (one unit in the
    last place): unbiased. Why not round to nearest: with beta2 = 0.999 a moment changes by 0.1 % a step,
    less than half of bfloat16's unit (0.4 %), so round to nearest would never let it decay. ``noise``:
    a ``Noise``; ``x`` is overwritten."""
    bits = x.view(xp.uint32)
    xp.add(bits, noise.take(bits.size), out=bits)
    bits >>= 16
    out.view(xp.uint16)[...] = bits


@functools.lru_cache(maxsize=None)
def _noise_table(xp):
    """2 x CHUNK uniform 16-bit values, drawn once (a fixed seed): a lookup table, like a sine table."""
    import numpy as np
    table = np.random.default_rng(0x5EED).integers(0, 1 << 16, size=2 * CHUNK, dtype=np.uint32)
    return table if xp is np else xp.asarray(table)


class Noise:
    """Uniform 16-bit rounding noise for one update: each piece reads the fixed table from an offset drawn
    at random (drawing every value afresh costs more than the update itself; what rounding needs is each
    element's noise uniform and new at every step, which a random offset into a random table gives).
    Seeded from the step and the parameter's first value: runs repeat, parameters and steps differ."""

    def __init__(self, xp, p, step):
        import numpy as np
        first = int(np.asarray(p.reshape(-1)[:1]).view(np.uint32)[0]) if p.dtype.itemsize == 4 else 0
        self.rng = np.random.default_rng((step, first, p.size))
        self.table = _noise_table(xp)

    def take(self, n):
        at = int(self.rng.integers(0, self.table.size - n + 1))
        return self.table[at:at + n]


def adam_update_fused(xp, p, g, m, v, v_max, step, lr, beta1, beta2, eps, weight_decay, decoupled, maximize):
    """The same step as ``adam_update`` in one CuPy kernel launch (GPU only; AMSGrad/maximize fall back)."""
    if v_max is not None or maximize or p.dtype.itemsize < 4 or m.dtype != p.dtype:   # the plain path
        return adam_update(xp, p, g, m, v, v_max, step, lr, beta1, beta2, eps, weight_decay, decoupled,
                           maximize)
    from ..backend import cuda_kernels  # imported only where CuPy runs
    cuda_kernels.adam_(p, g, m, v, lr, beta1, beta2, eps, weight_decay, step, decoupled)


class Adam(Optimizer):
    """Adam (Kingma & Ba) with L2 ``weight_decay`` added to the gradient, optional AMSGrad.

    Defaults: lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, maximize=False,
    bf16_state=False. State per parameter: 'step' (int), 'exp_avg', 'exp_avg_sq' (and 'max_exp_avg_sq' with
    amsgrad). ``bf16_state=True`` keeps the two moments in bfloat16 (half the state's bytes; float32 maths,
    stochastic rounding; float32 parameters, no amsgrad); a group's setting may change between steps (the
    moments are converted at the next step).
    """

    kernels = {"default": adam_update, "fused": adam_update_fused}
    _decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, *,
                 maximize=False, bf16_state=False):
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
        if bf16_state and amsgrad:
            raise ArgumentError("Adam: bf16_state=True does not go with amsgrad")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize, bf16_state=bool(bf16_state))
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
                    state["exp_avg"] = _moment(p, group.get("bf16_state"))
                    state["exp_avg_sq"] = _moment(p, group.get("bf16_state"))
                    if amsgrad:
                        state["max_exp_avg_sq"] = state_tensor(p)
                _state_in(state, p, group.get("bf16_state"))
                state["step"] += 1
                v_max = state.get("max_exp_avg_sq") if amsgrad else None
                if amsgrad and v_max is None:
                    v_max = state["max_exp_avg_sq"] = state_tensor(p)
                self._kernel(p.device)(p.device.xp, p.array, p.grad.array, state["exp_avg"].array,
                                       state["exp_avg_sq"].array, None if v_max is None else v_max.array,
                                       state["step"], lr, beta1, beta2, eps, wd, decoupled, maximize)
                p._version_counter.bump()
        return loss

    def cast_state(self):
        """Convert the moments now to the dtype each group's ``bf16_state`` asks for (``step`` would do it
        at the next step, beside the moments' old copies in the middle of a training step)."""
        for group in self.param_groups:
            for p in group["params"]:
                if self.state.get(p):
                    _state_in(self.state[p], p, group.get("bf16_state"))


def _moment(p, bf16):
    """A zero moment buffer for ``p``: bfloat16 with ``bf16``, else in the parameter's dtype."""
    if not bf16:
        return state_tensor(p)
    arr = get_backend(p.device).empty(p.array.shape, np_dtype(dtypes.bfloat16))
    arr[...] = 0
    return Tensor._make(arr, p.device)


def _state_in(state, p, bf16):
    """Moments converted to bfloat16 (``bf16``) or to the parameter's dtype if they are in the other."""
    want = dtypes.bfloat16 if bf16 else p.dtype
    if state["exp_avg"].dtype == want:
        return
    if want != p.dtype and (p.dtype != dtypes.float32 or "max_exp_avg_sq" in state):
        raise ArgumentError(f"Adam: bfloat16 moments need float32 parameters and no amsgrad (got {p.dtype})")
    be = get_backend(p.device)
    for key in ("exp_avg", "exp_avg_sq"):
        arr = be.empty(p.array.shape, np_dtype(want))
        arr[...] = state[key].array                     # to bfloat16: rounded to nearest, once
        state[key] = Tensor._make(arr, p.device)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter): ``p *= 1 - lr * weight_decay`` before the
    Adam update. Defaults as Adam but weight_decay=1e-2."""

    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, bf16_state=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize, bf16_state=bf16_state)
