"""Extension points: where features plug into ``Function.apply`` and the backward engine.

The core never imports the features that use these (amp, memory, compile, profiler, distributed); each
feature registers a callback here. ``Function.apply`` makes one explicit check per op (``mode.forward or
process.forward``: is a wrapper or cast registered for this thread, or for every thread?) and takes the
plain path when none is (saved-tensor hooks ride along on it: ``Mode.pack``); the engine checks once per
backward pass. So unused extension points cost ~20 ns per op.

=======================  ==========================================  =====================================
point                    signature                                   used by
=======================  ==========================================  =====================================
``input_casts``          ``fn(op, args, kwargs) -> Casts or None``   autocast: the dtype an op runs in
``saved_tensors_hooks``  ``pack(array) -> obj``, ``unpack(obj)``     checkpointing, offloading
``forward_wrappers``     ``fn(op, args, kwargs, run) -> Tensor``     graph capture records, the profiler
                                                                     times, the memory pool labels,
                                                                     anomaly mode checks, checkpointing
                                                                     numbers ops and replays
``backward_wrappers``    ``fn(node, grad, run) -> input grads``      the same, for each node's backward
``outside_apply_wrappers``  ``fn(function, args, kwargs, run)``      graph capture records, and piecewise
                                                                     replay runs, the calls of core
                                                                     functions marked ``@outside_apply``
``host_reads``           ``fn(tensor, what) -> None``                graph capture ends a graph there (a
                                                                     graph break); replay computes a value
post-accumulate-grad     ``Tensor.register_post_accumulate_grad_hook``  DDP launches a bucket's all-reduce
end of backward          ``engine.queue_callback(fn)``               DDP waits for its all-reduces
=======================  ==========================================  =====================================

**Names and order.** ``registry.add(fn, name=None, *, outermost=False, process_wide=False)`` returns a
handle whose ``remove()`` unregisters it; ``with registry.added(fn, name):`` does both around a block. A
name given twice is refused (``ValueError``, as chainer's ``add_hook``); without one, ``fn``'s qualified
name is used, numbered when taken (``record``, ``record#2``). Callbacks run in one defined order: those
added with ``outermost=True`` first, the most recent first (the profiler: its times include the others'
work), then the rest in the order they were added. ``registry.names()`` lists them in that order.

**Scope.** A registration belongs to the thread that made it: another thread's ops do not see it (two
threads can profile, checkpoint or run autocast independently). ``process_wide=True`` is for what is
process-wide by nature: the memory pool, which serves every thread, labels every thread's ops. Wrappers
of both kinds are ordered together, by the rule above.

``run`` is the rest of the chain: a wrapper calls ``run()`` exactly once and returns its result (possibly
after looking at it), or, to replace the op, returns a result without calling it (selective checkpointing
replays a kept output instead of recomputing it; wrappers after it then do not see that op). Example, a
wrapper that counts ops (what the profiler does, with timings)::

    from minigrad.autograd import extensions
    counts = collections.Counter()

    def count(op, args, kwargs, run):
        counts[op.name] += 1
        return run()

    with extensions.forward_wrappers.added(count, "op-counter"):
        model(x)
"""
import contextlib
import contextvars
import functools
import itertools
import threading

import numpy as np

from ..backend.dtypes import FLOAT_KINDS, bfloat16
from . import mode as _mode
from .opmath import widen


class Casts:
    """What an ``input_casts`` callback returns for an op that should run at another precision (one graph
    node either way; each input's gradient comes back in that input's own dtype: ``autograd/opmath.py``).

    ``dtype``: the dtype the op's floating inputs are converted to and its floating output is stored in.
    ``compute``: the dtype its arithmetic runs in (default ``dtype``). When they differ (float16 storage on
    NumPy, which has no float16 arithmetic: float32, PyTorch's CPU *opmath* type), the op runs on widened
    copies, its saves are stored in ``dtype`` and widened when read, its output is rounded to ``dtype``.
    ``cast(tensor) -> (stored, computed)``: the input's arrays in ``dtype`` and in ``compute`` (its own
    array where it should not change); autocast's weight-cast cache lives there. Default: convert.
    """
    __slots__ = ("dtype", "compute", "cast")

    def __init__(self, dtype, compute=None, cast=None):
        self.dtype = np.dtype(dtype)
        self.compute = self.dtype if compute is None else np.dtype(compute)
        self.cast = cast

    def __repr__(self):
        return f"Casts(dtype={self.dtype}, compute={self.compute})"


def bfloat16_casts(raw):
    """The ``Casts`` of an op with a bfloat16 input and no autocast: when its floating inputs promote to
    bfloat16, it computes in float32 and rounds its output to bfloat16 (NumPy has no bfloat16 arithmetic;
    ``ml_dtypes``' loops would also sum in bfloat16: 256 + 1 == 256). Mixed with wider floats, the op
    runs as NumPy promotes (float32 or float64)."""
    floats = [a.dtype for a in raw if getattr(a, "dtype", None) is not None and a.dtype.kind in FLOAT_KINDS]
    if np.result_type(*floats).kind != "V":
        return None
    return _BF16_F32


_BF16_F32 = Casts(bfloat16.np_dtype, np.float32)


_seq = itertools.count()   # registration order, shared by every registry and thread
_lock = threading.Lock()   # process-wide lists are replaced, never changed in place, under this lock


class _Entry:
    __slots__ = ("name", "fn", "outermost", "seq")

    def __init__(self, name, fn, outermost):
        self.name, self.fn, self.outermost, self.seq = name, fn, outermost, next(_seq)


def _order(entry):
    return (0, -entry.seq) if entry.outermost else (1, entry.seq)


class Registry:
    """Named callbacks for one extension point, in a defined order (see the module docstring)."""

    def __init__(self, name, on_change=None):
        self.name = name
        self._thread_entries = contextvars.ContextVar(f"minigrad.{name}", default=())  # this thread's entries
        self._process_entries = ()                                                     # process-wide entries
        self._on_change = on_change
        self._merged_entries = ((), (), ())  # (local, shared, callables): the last merge, reused while unchanged

    def add(self, fn, name=None, *, outermost=False, process_wide=False):
        """Register ``fn`` (under ``name``); returns a handle whose ``remove()`` unregisters it."""
        if not callable(fn):
            raise TypeError(f"{self.name}.add: expected a callable, got {type(fn).__name__}")
        with _lock:
            local = self._thread_entries.get()
            taken = {e.name for e in local + self._process_entries}
            if name is None:
                name = base = getattr(fn, "__qualname__", None) or type(fn).__name__
                for n in itertools.count(2):
                    if name not in taken:
                        break
                    name = f"{base}#{n}"
            elif name in taken:
                raise ValueError(f"{self.name}: a callback named {name!r} is already registered (names: "
                                 f"{self.names()}); remove it first or choose another name")
            entry = _Entry(name, fn, outermost)
            if process_wide:
                self._process_entries = tuple(sorted(self._process_entries + (entry,), key=_order))
            else:
                self._thread_entries.set(tuple(sorted(local + (entry,), key=_order)))
        self._changed()
        return _Handle(self, entry)

    def remove(self, fn):
        """Unregister the callback ``fn`` (or the one named ``fn``); nothing happens if it is not there."""
        with _lock:
            match = (lambda e: e.name == fn) if isinstance(fn, str) else (lambda e: e.fn is fn or e.fn == fn)
            local = self._thread_entries.get()
            hit = next((e for e in reversed(local) if match(e)), None)
            if hit is not None:
                self._thread_entries.set(tuple(e for e in local if e is not hit))
            else:
                hit = next((e for e in reversed(self._process_entries) if match(e)), None)
                if hit is None:
                    return
                self._process_entries = tuple(e for e in self._process_entries if e is not hit)
        self._changed()

    @contextlib.contextmanager
    def added(self, fn, name=None, *, outermost=False):
        """``with registry.added(fn, name):`` registers ``fn`` for the block only (this thread)."""
        handle = self.add(fn, name, outermost=outermost)
        try:
            yield fn
        finally:
            handle.remove()

    def current(self):
        """The callbacks in force in this thread, in order (its own and the process-wide ones)."""
        local, shared = self._thread_entries.get(), self._process_entries
        merged = self._merged_entries
        if merged[0] is local and merged[1] is shared:
            return merged[2]
        fns = tuple(e.fn for e in sorted(local + shared, key=_order)) if shared and local else \
            tuple(e.fn for e in (local or shared))
        self._merged_entries = (local, shared, fns)
        return fns

    callbacks = property(current, doc="``current()``: the callbacks in force in this thread, in order")

    def names(self):
        return [e.name for e in sorted(self._thread_entries.get() + self._process_entries, key=_order)]

    def _changed(self):
        if self._on_change is not None:
            self._on_change()

    def __bool__(self):
        return bool(self._thread_entries.get() or self._process_entries)

    def __iter__(self):
        return iter(self.current())

    def __repr__(self):
        return f"<extension point {self.name}: {len(self.names())} registered {self.names()}>"


class _Handle:
    def __init__(self, registry, entry):
        self._registry, self._entry = registry, entry

    @property
    def name(self):
        return self._entry.name

    def remove(self):
        self._registry.remove(self._entry.name)


def _refresh():
    """Recompute the flags the hot path reads: this thread's Mode and the process-wide ones."""
    m = _mode.get()
    forward = bool(input_casts._thread_entries.get() or forward_wrappers._thread_entries.get())
    backward = bool(backward_wrappers._thread_entries.get())
    if forward != m.forward or backward != m.backward:
        _mode.set(m.replace(forward=forward, backward=backward))
    _mode.process.forward = bool(input_casts._process_entries or forward_wrappers._process_entries)
    _mode.process.backward = bool(backward_wrappers._process_entries)


input_casts = Registry("input_casts", _refresh)
forward_wrappers = Registry("forward_wrappers", _refresh)
backward_wrappers = Registry("backward_wrappers", _refresh)


class saved_tensors_hooks:
    """Context manager: ``pack`` every array saved for backward, ``unpack`` it when backward reads it.

    The lever for activation offloading/compression and for recomputation (checkpointing). Per thread,
    innermost wins, as in PyTorch::

        with saved_tensors_hooks(lambda a: a.astype(np.float16), lambda a: a.astype(np.float32)):
            y = model(x)      # activations kept in float16 until backward reads them
    """

    def __init__(self, pack_hook, unpack_hook):
        self.hooks = (pack_hook, unpack_hook)

    def __enter__(self):
        m = _mode.get()
        _mode.set(m.replace(saved_hooks=m.saved_hooks + (self.hooks,)))
        return self

    def __exit__(self, *exc):
        m = _mode.get()
        hooks = m.saved_hooks
        i = len(hooks) - 1
        while i >= 0 and hooks[i] is not self.hooks:   # this block's pair: the innermost, unless a block
            i -= 1                                      # was left out of order
        if i >= 0:
            _mode.set(m.replace(saved_hooks=hooks[:i] + hooks[i + 1:]))
        return False


def current_saved_tensors_hooks():
    """The ``(pack, unpack)`` pair in force in this thread (the innermost), or None."""
    return _mode.get().pack


def device_of(args):
    """The device an op with these positional arguments runs on: its first tensor's (``Function.apply``
    checks that they all agree), or None. For wrappers and input casts, which see the arguments before."""
    for a in args:
        if hasattr(a, "device") and hasattr(a, "array"):
            return a.device
    return None


class _State:
    """Read-only view of the flags: is any forward (backward) extension in force in this thread?"""

    @property
    def forward(self):
        return _mode.get().forward or _mode.process.forward

    @property
    def backward(self):
        return _mode.get().backward or _mode.process.backward

    @property
    def outside_apply(self):
        return bool(outside_apply_wrappers)

    @property
    def host_reads(self):
        return bool(host_reads)


state = _State()


def run_forward(op, args, kwargs):
    """``Function.apply`` with extensions: the wrappers in order, then the op itself, called back with the
    casts (if an ``input_casts`` callback returns some), the grad mode and the saved-tensor hooks in force."""
    wrappers = forward_wrappers.current()
    if not wrappers:
        return _innermost(op, args, kwargs)
    return _wrap(wrappers, 0, op, args, kwargs)


def _wrap(wrappers, i, op, args, kwargs):
    if i == len(wrappers):
        return _innermost(op, args, kwargs)
    return wrappers[i](op, args, kwargs, lambda: _wrap(wrappers, i + 1, op, args, kwargs))


def _innermost(op, args, kwargs):
    casts = None
    for policy in input_casts.current():
        casts = policy(op, args, kwargs)
        if casts is not None:
            break
    m = _mode.get()
    return op.apply(*args, _extended=(m.grad, m.pack, casts), **kwargs)


def call_backward(node, grad):
    """One node's backward inside every backward wrapper (the engine calls this when any is in force).
    Wrappers see the gradient the node receives (its output's dtype)."""
    return _wrap_backward(backward_wrappers.current(), 0, node, grad)


def _wrap_backward(wrappers, i, node, grad):
    if i == len(wrappers):
        return node.backward(node, grad if node._compute is None else widen(node, grad))
    return wrappers[i](node, grad, lambda: _wrap_backward(wrappers, i + 1, node, grad))


# --- what Function.apply does not show: tensors made outside it, and reads of a tensor's values ----------
outside_apply_wrappers = Registry("outside_apply_wrappers")
host_reads = Registry("host_reads")


def outside_apply(fn):
    """Mark a core function that does work ``Function.apply`` does not show: it makes tensors without it
    (``mg.zeros``, ``mg.randn``, ``mg.tensor``, ``x > 0``, ``x.detach()``, ``argmax``, ``max(dim)``'s
    indices) or changes its arguments after an op (``batch_norm``'s running statistics).

    While an ``outside_apply_wrappers`` callback is in force in this thread, each call runs inside the
    callbacks as an op runs inside ``forward_wrappers``: ``wrap(function, args, kwargs, run)``, ``function``
    being the marked (public) function, so that a call can be recorded and replayed. Otherwise it costs one
    check of the registry."""
    @functools.wraps(fn)
    def call(*args, **kwargs):
        if not outside_apply_wrappers:
            return fn(*args, **kwargs)
        return _wrap_outside(outside_apply_wrappers.current(), 0, call, fn, args, kwargs)
    return call


def _wrap_outside(wrappers, i, public, fn, args, kwargs):
    if i == len(wrappers):
        return fn(*args, **kwargs)
    return wrappers[i](public, args, kwargs, lambda: _wrap_outside(wrappers, i + 1, public, fn, args, kwargs))


def host_read(tensor, what):
    """Tell the ``host_reads`` listeners that Python is about to read ``tensor``'s values on the host
    (``what``: 'item', 'numpy', 'tolist', 'array', 'bool', 'float', 'int', 'index', 'repr'). Called by
    those Tensor methods when a listener is in force; ``bool(t)`` calls ``t.item()``, so a listener may
    hear one read twice."""
    for fn in host_reads.current():
        fn(tensor, what)
