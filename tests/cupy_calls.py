"""The calls minigrad makes into the tests' fake CuPy modules, recorded so that tests/cuda/test_cupy_api.py
can check each one against the real CuPy (the name exists, the call binds to its signature, the argument
types suit its C types): the fakes can't drift from the library they stand for.

A fake marks what stands for a CuPy name; the decorator records every call made through it:

    @api("cupy.cuda.nccl.get_unique_id")            # a function
    def get_unique_id(): ...

    @api("cupy.cuda.Stream")                         # a class: its constructor, public methods,
    class Stream: ...                                # __call__/__enter__/__exit__ and properties

    cupy.empty = api("cupy.empty")(np.empty)         # a function borrowed from NumPy

Each distinct call (name, argument types, keyword names) is kept once in ``CALLS``; with the environment
variable MINIGRAD_CUPY_CALL_LOG=<dir> it is also appended to <dir>/<pid>.jsonl, from subprocesses too
(``make test-cuda`` sets it while it runs the fake harness, then checks the log against the real CuPy).
"""
import functools
import json
import os

import numpy as np

CALLS = []   # dicts: name, args (type descriptions), kwargs ({name: type}), self (an instance's .name)
_SEEN = set()
_SPECIAL = ("__call__", "__enter__", "__exit__")


def describe(value):
    """A value's type as the check reads it: 'ndarray:float32', 'int', 'numpy.float32', 'bytes', 'Stream'."""
    if isinstance(value, np.ndarray):
        return f"ndarray:{value.dtype.name}"
    if isinstance(value, np.generic):
        return f"numpy.{type(value).__name__}"
    return type(value).__name__


def _record(name, args, kwargs, owner=None):
    entry = {"name": name, "args": [describe(a) for a in args],
             "kwargs": {k: describe(v) for k, v in sorted(kwargs.items())}}
    if isinstance(getattr(owner, "name", None), str):
        entry["self"] = owner.name
    key = json.dumps(entry, sort_keys=True)
    if key in _SEEN:
        return
    _SEEN.add(key)
    CALLS.append(entry)
    where = os.environ.get("MINIGRAD_CUPY_CALL_LOG")
    if where:
        os.makedirs(where, exist_ok=True)
        with open(os.path.join(where, f"{os.getpid()}.jsonl"), "a") as f:
            f.write(key + "\n")


def _function(name, fn, method=False):
    @functools.wraps(fn)
    def recorded(*args, **kwargs):
        if method:
            _record(name, args[1:], kwargs, owner=args[0])
        else:
            _record(name, args, kwargs)
        return fn(*args, **kwargs)
    return recorded


def _property(name, prop):
    def get(self):
        _record(name, (), {}, owner=self)
        return prop.fget(self)
    return property(get, prop.fset, prop.fdel, prop.__doc__)


def api(name):
    """Decorator: the function or class stands for CuPy's ``name``; calls through it are recorded."""
    def mark(obj):
        if not isinstance(obj, type):
            return _function(name, obj)
        for attr, value in list(vars(obj).items()):
            if isinstance(value, (staticmethod, classmethod)):
                continue
            if attr == "__init__":
                setattr(obj, attr, _function(name, value, method=True))
            elif isinstance(value, property) and not attr.startswith("_"):
                setattr(obj, attr, _property(f"{name}.{attr}", value))
            elif callable(value) and (attr in _SPECIAL or not attr.startswith("_")):
                setattr(obj, attr, _function(f"{name}.{attr}", value, method=True))
        obj.cupy_name = name
        return obj
    return mark


def load(directory):
    """The distinct calls logged under ``directory`` (by every process that wrote there)."""
    seen, calls = set(), []
    for file in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
        with open(os.path.join(directory, file)) as f:
            for line in f:
                if line.strip() and line not in seen:
                    seen.add(line)
                    calls.append(json.loads(line))
    return calls
