"""``inference_mode``: PyTorch's name for "no graph at all here" (evaluation, sampling, serving).

In minigrad it is ``no_grad`` plus a flag that ``is_inference_mode_enabled()`` reads: ops record no graph
inside. PyTorch additionally marks the tensors made inside as *inference tensors* (no version counter, never
usable in autograd later) to save bookkeeping; minigrad's tensors made inside are ordinary tensors without a
graph, so using one later in autograd simply works (see docs/PYTORCH_DIFFERENCES.md).

Like PyTorch's, ``inference_mode(mode=False)`` turns it off (and grad mode on), and the object works as a
context manager and as a decorator, with or without parentheses. State is per thread (a context variable).
"""
import contextvars
import functools

from .grad_mode import is_grad_enabled, set_grad_enabled

_enabled = contextvars.ContextVar("minigrad_inference_mode", default=False)


def is_inference_mode_enabled():
    return _enabled.get()


class inference_mode:
    """``with mg.inference_mode():``, ``@mg.inference_mode()`` or ``@mg.inference_mode``."""

    def __new__(cls, mode=True):
        if callable(mode) and not isinstance(mode, bool):   # bare decorator: @inference_mode
            return cls()(mode)
        return super().__new__(cls)

    def __init__(self, mode=True):
        self.mode = bool(mode)
        self._saved = []

    def __enter__(self):
        self._saved.append((is_grad_enabled(), _enabled.set(self.mode)))
        set_grad_enabled(not self.mode)
        return self

    def __exit__(self, *exc):
        grad, token = self._saved.pop()
        _enabled.reset(token)
        set_grad_enabled(grad)
        return False

    def __call__(self, fn):
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with inference_mode(mode):
                return fn(*args, **kwargs)
        return wrapper

    def clone(self):
        return inference_mode(self.mode)
