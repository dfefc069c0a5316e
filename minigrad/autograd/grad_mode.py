"""Grad modes: whether ops record the graph. Per thread, as in PyTorch (``mode.py`` holds the state)."""
import functools

from . import mode as _mode


def is_grad_enabled():
    return _mode.get().grad


def _set(enabled):
    m = _mode.get()
    if m.grad is not enabled:
        _mode.set(m.replace(grad=enabled))


class _GradMode:
    """Base for no_grad/enable_grad: usable as a context manager and as a decorator."""
    mode = True

    def __enter__(self):
        self._prev = _mode.get().grad
        _set(self.mode)
        return self

    def __exit__(self, *exc):
        _set(self._prev)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_GradMode):
    """Ops inside build no graph (evaluation, optimizer updates)."""
    mode = False


class enable_grad(_GradMode):
    """Re-enable graph building inside a no_grad block (activation checkpointing needs this)."""
    mode = True


class set_grad_enabled(_GradMode):
    def __init__(self, mode):
        self.mode = bool(mode)
        self._prev = _mode.get().grad
        _set(self.mode)  # like PyTorch, also works as a plain function call

    def __enter__(self):
        return self

    def __call__(self, fn):
        mode = self.mode
        _set(self._prev)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)
        return wrapper


class _State:
    """``_state.enabled``, as the thread-local of earlier versions was read; ``is_grad_enabled()`` is the API."""

    @property
    def enabled(self):
        return _mode.get().grad


_state = _State()
