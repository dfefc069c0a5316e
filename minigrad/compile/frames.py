"""Python frames as the tracer sees them: which code is the op library, where a line of user code is, and
which function object a frame is running.

The tracer divides code in two. *Primitives* are the op library (``tensor.py``, ``ops/``, ``creation.py``,
``nn/functional.py``, ``autograd/``, ...): a call into it from program code is one step of the program,
recorded as a node. *Program code* is everything else (your functions, ``nn`` modules, the examples): the
tracer runs through it, as Dynamo inlines Python functions, and records only the primitives it calls.
"""
import gc
import linecache
import os
import types

import minigrad

_ROOT = os.path.dirname(os.path.abspath(minigrad.__file__))
_PRIMITIVE = tuple(os.path.join(_ROOT, p) for p in (
    "tensor.py", "tensor_base.py", "creation.py", "random.py", "errors.py", "ops" + os.sep, "autograd" + os.sep,
    "backend" + os.sep, "memory" + os.sep, os.path.join("nn", "functional.py"), os.path.join("nn", "parameter.py")))
_COMPILE = os.path.join(_ROOT, "compile") + os.sep
_kinds = {}   # code object -> "primitive" | "compile" | "program"


def kind(code):
    """'primitive', 'compile' (this package: invisible to the tracer) or 'program'."""
    k = _kinds.get(code)
    if k is None:
        f = os.path.abspath(code.co_filename)
        k = _kinds[code] = "compile" if f.startswith(_COMPILE) else \
            "primitive" if f.startswith(_PRIMITIVE) else "program"
    return k


def user_frame(frame):
    """The innermost frame at or above ``frame`` that is program code (None if there is none)."""
    while frame is not None and kind(frame.f_code) != "program":
        frame = frame.f_back
    return frame


def where(frame):
    """``'file.py:12 in forward'`` for the innermost program-code frame at or above ``frame``."""
    f = user_frame(frame)
    if f is None:
        return ""
    return f"{os.path.basename(f.f_code.co_filename)}:{f.f_lineno} in {f.f_code.co_name}"


def source_line(frame):
    """The text of the line ``where`` names (stripped), or ''."""
    f = user_frame(frame)
    return "" if f is None else linecache.getline(f.f_code.co_filename, f.f_lineno).strip()


_functions = {}  # (code, closure values) -> function object


def function_of(frame):
    """The function object ``frame`` is running (None if it cannot be found).

    Python 3.11 frames know their code but not their function. Functions sharing one code object (the
    closures ``lt``, ``gt``... made by one factory) are told apart by their closure cells' contents.
    """
    code = frame.f_code
    free = tuple(frame.f_locals.get(v) for v in code.co_freevars)
    key = (code, tuple(id(v) for v in free))
    fn = _functions.get(key)
    if fn is None:
        for obj in gc.get_referrers(code):
            if isinstance(obj, types.FunctionType) and obj.__code__ is code:
                cells = tuple(c.cell_contents for c in (obj.__closure__ or ()))
                if len(cells) == len(free) and all(a is b for a, b in zip(cells, free)):
                    fn = _functions[key] = obj
                    break
    return fn


def call_arguments(frame):
    """``(args, kwargs)`` that reproduce the call ``frame`` is starting (read at its 'call' event)."""
    code, loc = frame.f_code, frame.f_locals
    n = code.co_argcount
    names = code.co_varnames
    args = [loc[v] for v in names[:n]]
    kwargs = {v: loc[v] for v in names[n:n + code.co_kwonlyargcount]}
    i = n + code.co_kwonlyargcount
    if code.co_flags & 0x04:  # CO_VARARGS
        args.extend(loc[names[i]])
        i += 1
    if code.co_flags & 0x08:  # CO_VARKEYWORDS
        kwargs.update(loc[names[i]])
    return tuple(args), kwargs
