"""Inside the sandbox child: what the grader's own code relies on, bound before student code runs, and
checked after it ran. Standard library only (it is imported before numpy).

* ``Guard``: a snapshot of the functions and classes of minigrad, numpy, the grader and the standard modules
  the grader uses (every module dict entry, every method of their classes, every function's code and
  defaults), taken after the spec's preamble and before any student cell. ``check()`` names what a graded
  cell replaced since (``np.allclose = ...``, ``engine.run_backward = ...``, ``Tensor.backward = ...``,
  ``observe.__code__ = ...``): the grader fails the part, since a patched harness measures nothing.
* the tracemalloc controls (``start``, ``stop``, ``reset_peak``, ``clear_traces``) are taken away from
  student code, in both ``tracemalloc`` and ``_tracemalloc``; ``meter()`` holds the originals.
* ``meter()``: the one way an observe measures memory. It checks, when the measured code is done, that
  tracing was never stopped or restarted (an allocation made when it started must still be traced) and
  that nothing above was replaced, and raises ``MeasurementError`` otherwise.

This protects against a graded cell that patches what the grader uses through ordinary Python. Code that
walks the interpreter's frames or the garbage collector's heap to rewrite the harness's own variables is
refused by the static scan (``forbidden.INTEGRITY``); see the threat model in autograder/README.md.
"""
import sys

import _tracemalloc

WATCHED = ("minigrad", "autograder", "numpy", "tracemalloc", "_tracemalloc", "gc", "sys", "builtins", "json",
           "io", "os", "time", "threading", "zipfile", "math", "operator", "functools", "collections",
           "contextlib", "weakref", "copy", "types", "linecache", "importlib", "traceback")
_CONTROLS = ("start", "stop", "reset_peak", "clear_traces")

# bound now, before any student code: the meter uses these, never the modules' attributes
_start, _stop, _reset_peak = _tracemalloc.start, _tracemalloc.stop, _tracemalloc.reset_peak
_is_tracing, _traced_memory = _tracemalloc.is_tracing, _tracemalloc.get_traced_memory
_object_traceback = _tracemalloc._get_object_traceback
_is, _getattr, _isinstance, _type = (lambda a, b: a is b), getattr, isinstance, type


class IntegrityError(RuntimeError):
    """Graded code replaced something the grader relies on."""


class MeasurementError(IntegrityError):
    """A memory measurement was tampered with (tracing stopped, restarted or reset)."""


def _refused(name):
    def refused(*args, **kwargs):
        raise IntegrityError(f"tracemalloc.{name}(): the grader measures memory with tracemalloc, so graded "
                             f"code may not start, stop or reset it")
    refused.__name__ = name
    return refused


def lock_tracemalloc():
    """Take the tracemalloc controls away from student code (the meter keeps the originals)."""
    import tracemalloc
    for name in _CONTROLS:
        stub = _refused(name)
        setattr(tracemalloc, name, stub)
        setattr(_tracemalloc, name, stub)


def protect_imports(private=("autograder",)):
    """The grader's own modules cannot be imported from a student's cell (a cell's code object is named
    ``<cell ...>``): ``import``, ``__import__``, ``importlib.import_module`` and ``importlib.__import__`` refuse
    them there, whatever the name was built from. The wrappers live in ``builtins`` and ``importlib``, which
    the guard watches, so a cell that puts the originals back fails too."""
    import builtins
    import importlib

    def refuse(name, depth):
        if isinstance(name, str) and name.split(".", 1)[0] in private and \
                sys._getframe(depth).f_code.co_filename.startswith("<cell "):
            raise IntegrityError(f"graded code may not import the grader's modules ({name}): the grader's "
                                 f"helpers and expected values are not the student's to use")

    original_import, original_import_module = builtins.__import__, importlib.import_module

    def __import__(name, globals=None, locals=None, fromlist=(), level=0):
        if not level:
            refuse(name, 2)
        return original_import(name, globals, locals, fromlist, level)

    def import_module(name, package=None):
        refuse(name, 2)
        return original_import_module(name, package)
    builtins.__import__ = __import__
    importlib.__import__ = __import__
    importlib.import_module = import_module


def _watched(name):
    return name.split(".", 1)[0] in WATCHED


class Guard:
    def __init__(self):
        self.entries = []            # (owner name, namespace, key, value, code, defaults, kwdefaults)
        self.seen = set()
        self.known = {}              # id -> function: minigrad's own functions, as they were at the snapshot
        self.class_keys = []         # (owner name, class __dict__, its keys at the snapshot): nothing added
        self.armed = False           # only in the sandbox child, after snapshot(); elsewhere check() finds nothing

    def _add(self, owner, ns, key, value):
        func = _getattr(value, "__func__", value)
        if _type(func).__name__ == "function" and (_getattr(func, "__module__", "") or "").startswith("minigrad"):
            self.known[id(func)] = func
        code = _getattr(value, "__code__", None) if _type(value).__name__ == "function" else None
        self.entries.append((owner, ns, key, value, code, _getattr(value, "__defaults__", None) if code else None,
                             _getattr(value, "__kwdefaults__", None) if code else None))

    def watch_module(self, name, mod):
        ns = _getattr(mod, "__dict__", None)
        if ns is None or name in self.seen:
            return
        self.seen.add(name)
        for key, value in list(ns.items()):
            if not callable(value):
                continue
            self._add(name, ns, key, value)
            if _isinstance(value, type) and _watched(_getattr(value, "__module__", "") or "") and \
                    _getattr(value, "__module__", None) == name:
                self.class_keys.append((f"{name}.{key}", value.__dict__, frozenset(value.__dict__)))
                for k, v in list(value.__dict__.items()):
                    if callable(v) or _type(v) in (staticmethod, classmethod, property):
                        self._add(f"{name}.{key}", value.__dict__, k, v)

    def snapshot(self):
        self.armed = True
        for name, mod in list(sys.modules.items()):
            if _watched(name):
                self.watch_module(name, mod)

    def check(self):
        """What was replaced since the snapshot ([] if nothing). Modules imported since are added."""
        if not self.armed:
            return []
        bad = []
        for owner, ns, key, value, code, defaults, kwdefaults in self.entries:
            now = ns.get(key, ns)
            if not _is(now, value) and self._swapped_by_minigrad(now):
                continue
            if not _is(now, value):
                bad.append(f"{owner}.{key}" + (" (deleted)" if _is(now, ns) else ""))
            elif code is not None and not (_is(value.__code__, code) and _is(value.__defaults__, defaults)
                                           and _is(value.__kwdefaults__, kwdefaults)):
                bad.append(f"{owner}.{key} (its code)")
        for owner, ns, keys in self.class_keys:          # a method set on a subclass shadows its base's
            bad.extend(f"{owner}.{key}" for key in list(ns) if key not in keys and callable(ns[key]))
        for name, mod in list(sys.modules.items()):     # trust on first use: imported since the snapshot
            if _watched(name) and name not in self.seen:
                self.watch_module(name, mod)
        return bad

    def _swapped_by_minigrad(self, now):
        """minigrad swaps a few of its own functions in and out by design (``Function.apply`` while extensions
        such as the memory pool are registered): a value that is one of minigrad's own original functions
        (or a classmethod / staticmethod of one) is no patch."""
        func = _getattr(now, "__func__", now)
        return _is(self.known.get(id(func)), func)

    def describe(self, bad):
        shown = ", ".join(f"`{b}`" for b in bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")
        return (f"your code replaced {shown}, which the grader relies on to run and measure your code: "
                f"graded code may not patch minigrad, numpy, the standard library or the grader")


GUARD = Guard()


class _Meter:
    """Bytes allocated (every Python and NumPy allocation tracemalloc sees) while the block runs."""

    def __init__(self):
        self.peak = self.current = 0

    def __enter__(self):
        self.was_tracing = _is_tracing()
        if not self.was_tracing:
            _start()
        self.sentinel = bytearray(64)           # traced now: still traced at the end unless tracing restarted
        _reset_peak()
        self.base = _traced_memory()[0]
        return self

    def __exit__(self, *exc):
        current, peak = _traced_memory()
        tracing = _is_tracing()
        kept = tracing and _object_traceback(self.sentinel) is not None
        if not self.was_tracing and tracing:
            _stop()
        if exc[0] is not None:
            return False
        if not kept:
            raise MeasurementError("the memory measurement was tampered with: tracemalloc was stopped, cleared "
                                   "or restarted while your code ran")
        bad = GUARD.check()
        if bad:
            raise IntegrityError(GUARD.describe(bad))
        self.peak, self.current = peak - self.base, current - self.base
        return False


def meter():
    """``with meter() as m: ...`` then ``m.peak`` and ``m.current``: bytes above what was allocated at the
    start (peak while the block ran; still allocated at its end)."""
    return _Meter()
