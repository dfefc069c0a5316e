"""Grad modes: whether ops record the graph. Thread-local, as in PyTorch."""
import functools
import threading


class _State(threading.local):
    enabled = True


_state = _State()


def is_grad_enabled():
    return _state.enabled


class _GradMode:
    """Base for no_grad/enable_grad: usable as a context manager and as a decorator."""
    mode = True

    def __enter__(self):
        self._prev = _state.enabled
        _state.enabled = self.mode
        return self

    def __exit__(self, *exc):
        _state.enabled = self._prev
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
        self._prev = _state.enabled
        _state.enabled = self.mode  # like PyTorch, also works as a plain function call

    def __enter__(self):
        return self

    def __call__(self, fn):
        mode = self.mode
        _state.enabled = self._prev

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)
        return wrapper
