"""gradcheck: compare analytic gradients with float64 central differences.

For a random projection ``v`` of the output (fixed seed), the scalar ``L = sum(v * fn(*inputs))`` is
differentiated twice: by backward (analytic) and by ``(L(x + eps) - L(x - eps)) / 2 eps`` for every element
of every input that requires grad (numeric). One vector-Jacobian product with a random ``v`` catches wrong
gradients with probability 1 and costs only two forward passes per input element.
"""
import numpy as np

from ..errors import GradcheckError
from . import function, grad_mode
from .engine import grad


def _as_tuple(x):
    return x if isinstance(x, (tuple, list)) else (x,)


def gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, seed=0, raise_exception=True):
    """Return True if analytic and numeric gradients agree for every input that requires grad.

    Otherwise raise GradcheckError naming the input, the index of the worst element, the analytic and
    numeric values and the relative error (or return False when ``raise_exception=False``).
    Inputs that require grad should be float64; lower precision makes central differences meaningless.
    """
    Tensor = function.Tensor
    inputs = _as_tuple(inputs)
    targets = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    if not targets:
        raise GradcheckError("gradcheck: no input requires grad")
    for i in targets:
        if inputs[i].dtype.name != "float64":
            raise GradcheckError(f"gradcheck: input {i} is {inputs[i].dtype.name}; use float64 inputs "
                                 f"(central differences need double precision)")
    rng = np.random.default_rng(seed)
    outs = _as_tuple(fn(*inputs))
    outs = [o for o in outs if isinstance(o, Tensor) and o.dtype.is_floating_point]
    projections = [rng.standard_normal(o.shape) for o in outs]

    def loss_value():
        with grad_mode.no_grad():
            res = _as_tuple(fn(*inputs))
            res = [o for o in res if isinstance(o, Tensor) and o.dtype.is_floating_point]
            return sum(float((o.device.backend.to_host(o.array).astype(np.float64) * v).sum())
                       for o, v in zip(res, projections))

    # analytic: one vector-Jacobian product with v (autograd.grad: the inputs' .grad stay untouched)
    live = [(o, v) for o, v in zip(outs, projections) if o.requires_grad]
    grads = [None] * len(targets)
    if live:
        grads = grad([o for o, _ in live], [inputs[i] for i in targets],
                     [Tensor._make(o.device.backend.asarray(v.astype(o.array.dtype)), o.device) for o, v in live],
                     allow_unused=True)
    for i, g in zip(targets, grads):
        t = inputs[i]
        analytic = np.zeros(t.shape) if g is None else t.device.backend.to_host(g.array)
        host = t.device.backend.to_host(t.array).copy()
        numeric = np.zeros(host.shape)
        flat = host.reshape(-1)
        num_flat = numeric.reshape(-1)
        for k in range(flat.size):
            orig = flat[k]
            flat[k] = orig + eps
            t.array[...] = t.device.backend.asarray(host)
            plus = loss_value()
            flat[k] = orig - eps
            t.array[...] = t.device.backend.asarray(host)
            minus = loss_value()
            flat[k] = orig
            num_flat[k] = (plus - minus) / (2 * eps)
        t.array[...] = t.device.backend.asarray(host)
        err = np.abs(analytic - numeric)
        bound = atol + rtol * np.abs(numeric)
        if np.any(err > bound) or not np.all(np.isfinite(analytic)):
            score = np.where(np.isfinite(err), err - bound, np.inf)
            worst = np.unravel_index(int(np.argmax(score)), numeric.shape)
            a, n = analytic[worst], numeric[worst]
            rel = abs(a - n) / max(abs(n), 1e-12)
            msg = (f"gradcheck failed for input {i} (shape {tuple(t.shape)}) at index {tuple(int(x) for x in worst)}: "
                   f"analytic {a:.6g} vs numeric {n:.6g}, relative error {rel:.3g} "
                   f"(atol={atol}, rtol={rtol})")
            if raise_exception:
                raise GradcheckError(msg)
            return False
    return True


def gradgradcheck(func, inputs, grad_outputs=None, eps=1e-6, atol=1e-5, rtol=1e-3, seed=0,
                  raise_exception=True):
    """Check second derivatives, as PyTorch's ``gradgradcheck``: ``gradcheck`` of the function
    ``(inputs, grad_outputs) -> autograd.grad(func(inputs), inputs, grad_outputs, create_graph=True)``.

    The vector-Jacobian product is differentiated with respect to the inputs (the second derivative of
    ``func``) and to ``grad_outputs`` (it is linear in them: the first derivative again), by backward
    through the graph ``create_graph=True`` built and by central differences. ``grad_outputs`` default to
    random float64 tensors (fixed ``seed``) that require grad. Inputs should be float64.
    """
    Tensor = function.Tensor
    inputs = tuple(_as_tuple(inputs))
    outs = [o for o in _as_tuple(func(*inputs)) if isinstance(o, Tensor) and o.requires_grad]
    if grad_outputs is None:
        rng = np.random.default_rng(seed + 1)
        grad_outputs = tuple(Tensor._make(o.device.backend.asarray(rng.standard_normal(o.shape)), o.device,
                                          requires_grad=True) for o in outs)
    grad_outputs = tuple(_as_tuple(grad_outputs))
    if len(grad_outputs) != len(outs):
        raise GradcheckError(f"gradgradcheck: {len(grad_outputs)} grad_outputs for {len(outs)} outputs "
                             f"that require grad")
    n = len(inputs)
    targets = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]

    def first_derivative(*args):
        ins, gos = args[:n], args[n:]
        with grad_mode.enable_grad():   # gradcheck's numeric side calls this under no_grad
            res = [o for o in _as_tuple(func(*ins)) if isinstance(o, Tensor) and o.requires_grad]
            grads = grad(res, [ins[i] for i in targets], list(gos), create_graph=True, allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return gradcheck(first_derivative, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol, seed=seed,
                     raise_exception=raise_exception)
