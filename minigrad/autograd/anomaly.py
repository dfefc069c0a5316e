"""detect_anomaly(): fail fast, naming the op, when a forward or backward produces NaN or Inf; and when a
backward fails, say where in your code the failing node's forward ran.

Part of autograd (``torch.autograd.detect_anomaly`` in PyTorch), built on the extension points instead of
inside the engine's loop, so that the loop stays the one lecture 01 shows and costs nothing while anomaly
mode is off. Per thread, like every mode: while on in a thread, it wraps that thread's ops' forwards (it
checks the output, and remembers the forward's call stack on the node) and backwards (it checks each
gradient, and adds the remembered stack to any error). ``check_nan=False`` keeps the stacks, skips the
NaN/Inf checks (PyTorch's meaning).
"""
import contextvars
import functools
import traceback

from ..errors import AnomalyError
from . import extensions

_on = contextvars.ContextVar("minigrad.anomaly", default=None)   # None, or check_nan of the innermost


class detect_anomaly:
    """Context manager (and decorator): check every op's output and every gradient for NaN/Inf."""

    def __init__(self, check_nan=True):
        self.check_nan = bool(check_nan)

    def __enter__(self):
        self._prev = _on.get()
        if self._prev is None:
            self._handles = (extensions.forward_wrappers.add(_forward, "anomaly"),
                             extensions.backward_wrappers.add(_backward, "anomaly"))
        _on.set(self.check_nan)
        return self

    def __exit__(self, *exc):
        _on.set(self._prev)
        if self._prev is None:
            for h in self._handles:
                h.remove()
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*a, **k):
            with detect_anomaly(self.check_nan):
                return fn(*a, **k)
        return wrapper


def is_anomaly_enabled():
    return _on.get() is not None


def is_anomaly_check_nan_enabled():
    return bool(_on.get())


def _forward(op, args, kwargs, run):
    out = run()
    if out.grad_fn is not None:
        out.grad_fn._anomaly_stack = traceback.format_stack()[:-3]  # where the op was called from
    if _on.get():
        check(out.array, out.device.xp, op.name, "output")
    return out


def _backward(node, grad, run):
    try:
        grads = run()
        if _on.get():
            for i, g in enumerate(grads if type(grads) is tuple else (grads,)):
                check(g, node.xp, node.name, f"gradient for input {i}")
    except Exception as e:
        stack = getattr(node, "_anomaly_stack", None)
        if stack and hasattr(e, "add_note"):    # Python >= 3.11
            e.add_note(f"detect_anomaly: the forward call of {node.name} that created this node:\n"
                       + "".join(stack[-6:]))
        raise
    return grads


def check(array, xp, op_name, where):
    """Raise AnomalyError if a floating ``array`` holds NaN or Inf; ``where`` is 'output' or 'gradient'."""
    if array is None or array.dtype.kind != "f" or bool(xp.isfinite(array).all()):
        return
    bad = "NaN" if bool(xp.isnan(array).any()) else "Inf"
    raise AnomalyError(f"detect_anomaly: {op_name} produced {bad} in its {where} "
                       f"(shape {tuple(array.shape)}, dtype {array.dtype})")
