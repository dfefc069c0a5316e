"""``minigrad.jit``: PyTorch's ``torch.jit`` decorators, so tutorial code that scripts or traces runs.

minigrad has no TorchScript: ``script`` and ``trace`` return the function or module unchanged (it runs
eagerly, with Python's control flow; a one-time warning says so), ``ignore`` / ``unused`` / ``export``
return what they decorate, and ``save`` / ``load`` of TorchScript archives raise, naming ``mg.save`` /
``mg.load``. For a recorded graph per input signature (what ``trace`` gives), use ``mg.compile``.
"""
import warnings

from .errors import UnavailableError

_noted = set()   # which of script / trace has warned (once per process, as a note)


def _note(what):
    if what not in _noted:
        _noted.add(what)
        warnings.warn(f"minigrad.jit.{what}: minigrad has no TorchScript; the function or module is returned "
                      f"unchanged and runs eagerly (mg.compile records graphs)", stacklevel=3)


def script(obj, optimize=None, _frames_up=0, _rcb=None, example_inputs=None):
    _note("script")
    return obj


def trace(func, example_inputs=None, *args, **kwargs):
    _note("trace")
    return func


def trace_module(mod, inputs, *args, **kwargs):
    _note("trace")
    return mod


def _passthrough(fn=None, **_options):
    """A decorator usable bare (``@ignore``) or called (``@ignore(drop=True)``)."""
    return fn if fn is not None else (lambda f: f)


ignore = unused = export = _passthrough


def is_scripting():
    return False


def is_tracing():
    return False


def annotate(the_type, the_value):
    return the_value


class _Final:
    """``x: torch.jit.Final[int]``: a class-attribute annotation; ``Final[int]`` is ``int`` here."""

    def __getitem__(self, item):
        return item


Final = _Final()


def save(m, f, _extra_files=None):
    raise UnavailableError("minigrad.jit.save: minigrad has no TorchScript archives; save the weights with "
                           "mg.save(model.state_dict(), path)")


def load(f, map_location=None, _extra_files=None):
    raise UnavailableError("minigrad.jit.load: minigrad has no TorchScript archives; build the model in Python "
                           "and load its weights with model.load_state_dict(mg.load(path))")
