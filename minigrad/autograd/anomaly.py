"""detect_anomaly(): fail fast, naming the op, when a forward or backward produces NaN or Inf."""
from ..errors import AnomalyError
from . import grad_mode


class _Anomaly:
    enabled = False


state = _Anomaly()


class detect_anomaly:
    """Context manager (and decorator): check every op's output and every gradient for NaN/Inf."""

    def __init__(self, check_nan=True):
        self.check_nan = check_nan

    def __enter__(self):
        self._prev = state.enabled
        state.enabled = self.check_nan
        return self

    def __exit__(self, *exc):
        state.enabled = self._prev
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*a, **k):
            with detect_anomaly(self.check_nan):
                return fn(*a, **k)
        return wrapper


def is_anomaly_enabled():
    return state.enabled


def check(array, xp, op_name, where):
    """Raise AnomalyError if a floating ``array`` holds NaN or Inf; ``where`` is 'output' or 'gradient'."""
    if array is None or array.dtype.kind != "f" or bool(xp.isfinite(array).all()):
        return
    bad = "NaN" if bool(xp.isnan(array).any()) else "Inf"
    raise AnomalyError(f"detect_anomaly: {op_name} produced {bad} in its {where} "
                       f"(shape {tuple(array.shape)}, dtype {array.dtype})")


__all__ = ["detect_anomaly", "is_anomaly_enabled", "grad_mode"]
