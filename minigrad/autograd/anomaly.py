"""detect_anomaly(): fail fast, naming the op, when a forward or backward produces NaN or Inf.

It is a feature on the core's extension points: while on, it wraps every op's forward and every node's
backward and checks what they return (the core pays nothing when it is off).
"""
import functools

from ..errors import AnomalyError
from . import extensions


class _Anomaly:
    enabled = False


state = _Anomaly()


class detect_anomaly:
    """Context manager (and decorator): check every op's output and every gradient for NaN/Inf."""

    def __init__(self, check_nan=True):
        self.check_nan = check_nan

    def __enter__(self):
        self._prev = state.enabled
        _switch(self.check_nan)
        return self

    def __exit__(self, *exc):
        _switch(self._prev)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*a, **k):
            with detect_anomaly(self.check_nan):
                return fn(*a, **k)
        return wrapper


def is_anomaly_enabled():
    return state.enabled


def _switch(enabled):
    if enabled and not state.enabled:
        extensions.forward_wrappers.add(_check_forward)
        extensions.backward_wrappers.add(_check_backward)
    elif not enabled and state.enabled:
        extensions.forward_wrappers.remove(_check_forward)
        extensions.backward_wrappers.remove(_check_backward)
    state.enabled = bool(enabled)


def _check_forward(op, args, kwargs, run):
    out = run()
    check(out.data, out.device.xp, op.name, "output")
    return out


def _check_backward(node, grad, run):
    grads = run()
    for i, g in enumerate(grads if type(grads) is tuple else (grads,)):
        check(g, node.xp, node.name, f"gradient for input {i}")
    return grads


def check(array, xp, op_name, where):
    """Raise AnomalyError if a floating ``array`` holds NaN or Inf; ``where`` is 'output' or 'gradient'."""
    if array is None or array.dtype.kind != "f" or bool(xp.isfinite(array).all()):
        return
    bad = "NaN" if bool(xp.isnan(array).any()) else "Inf"
    raise AnomalyError(f"detect_anomaly: {op_name} produced {bad} in its {where} "
                       f"(shape {tuple(array.shape)}, dtype {array.dtype})")
