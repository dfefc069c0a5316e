"""The recording machinery of one profile: wrappers on the core's extension points, per-thread stacks of
open ranges, pool byte counters and CUDA events. Used by ``profiler.profile``; split out so that file reads
as the user-facing API.

A recorder records the thread that started it (its wrappers are registered for that thread only, and it
is that thread's ``active()`` one), or every thread with ``all_threads=True`` (registered process-wide).
With none installed the profiler costs nothing: its wrappers are not registered, ``record_function``
reads one context variable, and the DataLoader checks its (empty) registry.
"""
import contextvars
import os
import threading
import traceback
from time import perf_counter_ns

from ..autograd import extensions
from ..backend.device import get_backend
from ..tensor import Tensor
from ..utils.data import dataloader as _dataloader
from .events import EventList, FunctionEvent

_active = contextvars.ContextVar("minigrad.profiler", default=None)  # this thread's recorder
_everywhere = []     # the recorder installed for every thread (profile(all_threads=True)), if any


def active():
    """The recorder recording this thread's ops, or None."""
    return _active.get() or (_everywhere[0] if _everywhere else None)
_MINIGRAD_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class _CudaTimer:
    """CUDA events around each op on a real GPU: recorded on the stream as the op is launched, read once
    after the final synchronise, so timing an op never waits for the GPU."""

    def __init__(self, xp):
        self.xp = xp
        self.origin = self._record()

    def _record(self):
        ev = self.xp.cuda.Event()
        ev.record()
        return ev

    def start(self):
        return self._record()

    def stop(self, start):
        return start, self._record()

    def resolve(self, pair):
        """(start offset from the profile's start, duration) in ns; call after synchronise()."""
        start, end = pair
        elapsed = self.xp.cuda.get_elapsed_time
        return int(elapsed(self.origin, start) * 1e6), int(elapsed(start, end) * 1e6)

    def synchronize(self):
        self.xp.cuda.Device().synchronize()


def _timer_for(device):
    """A CUDA timer for a device whose arrays live on a GPU (CuPy), None for cpu and the NumPy emulator."""
    if device.type != "cuda":
        return None
    xp = get_backend(device).xp
    if not hasattr(xp, "cuda") or not hasattr(xp.cuda, "Event"):
        return None
    return _CudaTimer(xp)


class _Recorder:
    def __init__(self, record_shapes=False, profile_memory=False, with_stack=False, all_threads=False):
        self.record_shapes, self.profile_memory, self.with_stack = record_shapes, profile_memory, with_stack
        self.all_threads = all_threads
        self.events = []
        self.local = threading.local()
        self.threads = {}    # threading ident -> (small id, thread name)
        self.timers = {}     # str(device) -> _CudaTimer or None
        self.start_ns = perf_counter_ns()
        self.end_ns = None

    # --- ranges -------------------------------------------------------------------------------------
    def _stack(self):
        stack = getattr(self.local, "stack", None)
        if stack is None:
            stack = self.local.stack = []
            t = threading.current_thread()
            self.local.thread = self.threads.setdefault(t.ident, (len(self.threads), t.name))[0]
        return stack

    def begin(self, name, kind, device=None, shapes=None):
        stack = self._stack()
        parent = stack[-1] if stack else None
        ev = FunctionEvent(name, kind, self.local.thread, None if device is None else str(device), shapes,
                           self._python_stack() if self.with_stack else None, parent)
        if parent is not None:
            parent.children.append(ev)
        stack.append(ev)
        self.events.append(ev)
        if device is not None:
            if self.profile_memory:
                ev._mem0 = _pool_counters(device)
            if device.type == "cuda":           # cpu ops need no device timer: skip the lookup
                timer = self._timer(device)
                if timer is not None:
                    ev._cuda = (timer, timer.start())
        ev.start_ns = perf_counter_ns()
        return ev

    def end(self, ev, device=None):
        ev.end_ns = perf_counter_ns()
        if ev._cuda is not None:
            timer, start = ev._cuda
            ev._cuda = (timer, timer.stop(start))
        if ev._mem0 is not None:
            a0, f0 = ev._mem0
            a1, f1 = _pool_counters(device)
            ev.allocated_bytes, ev.memory_usage = a1 - a0, (a1 - a0) - (f1 - f0)
            ev._mem0 = None
        stack = self.local.stack
        if stack and stack[-1] is ev:
            stack.pop()
        elif ev in stack:       # a range left open inside this one (an exception): close it too
            del stack[stack.index(ev):]

    def _timer(self, device):
        key = str(device)
        if key not in self.timers:
            self.timers[key] = _timer_for(device)
        return self.timers[key]

    @staticmethod
    def _python_stack():
        frames = traceback.extract_stack()[:-3]
        return [f"{f.filename}({f.lineno}): {f.name}" for f in frames
                if not os.path.abspath(f.filename).startswith(_MINIGRAD_DIR)][-8:]

    # --- the wrappers ---------------------------------------------------------------------------------
    def forward(self, op, args, kwargs, run):
        device = extensions.device_of(args)
        shapes = [list(a.shape) if isinstance(a, Tensor) else [] for a in args] if self.record_shapes else None
        ev = self.begin(op.name, "cpu_op", device, shapes)
        try:
            return run()
        finally:
            self.end(ev, device)

    def backward(self, node, grad, run):
        shapes = [list(grad.shape)] if self.record_shapes else None
        ev = self.begin(node.name + ".backward", "backward", node.device, shapes)
        try:
            return run()
        finally:
            self.end(ev, node.device)

    def next_batch(self, iterator, run):
        ev = self.begin(f"enumerate(DataLoader)#{type(iterator).__name__}.__next__", "dataloader")
        try:
            return run()
        finally:
            self.end(ev)

    # --- life cycle -------------------------------------------------------------------------------------
    def install(self):
        if active() is not None:
            raise RuntimeError("profiler: another profile is already recording (profiles do not nest)")
        if self.all_threads:
            _everywhere.append(self)
        else:
            self._token = _active.set(self)
        scope = dict(process_wide=self.all_threads)
        self._handles = (  # outermost: its times include the other wrappers' work (the pool's)
            extensions.forward_wrappers.add(self.forward, "profiler", outermost=True, **scope),
            extensions.backward_wrappers.add(self.backward, "profiler", outermost=True, **scope),
            _dataloader.batch_wrappers.add(self.next_batch, "profiler", **scope))

    def uninstall(self):
        """Stop recording, wait for the GPU once, read the CUDA events; returns the events."""
        for handle in self._handles:
            handle.remove()
        if self.all_threads:
            _everywhere.remove(self)
        else:
            _active.set(None)
        self.end_ns = perf_counter_ns()
        for timer in self.timers.values():
            if timer is not None:
                timer.synchronize()
        for ev in self.events:
            if ev._cuda is not None:
                timer, pair = ev._cuda
                ev.device_start_ns, ev.device_ns = timer.resolve(pair)
                ev._cuda = None
            if ev.end_ns == 0:      # still open when the profile stopped
                ev.end_ns = self.end_ns
        for ev in reversed(self.events):  # children before parents: ranges without a device hold
            if ev.device is None and self.profile_memory:  # the bytes of the ops inside them
                ev.memory_usage = sum(c.memory_usage for c in ev.children)
                ev.allocated_bytes = sum(c.allocated_bytes for c in ev.children)
        return EventList(self.events)


def _pool_counters(device):
    """(bytes handed out, bytes taken back) so far by the device's pool; zeros when it has none."""
    storage = (device.backend or get_backend(device)).allocator
    if storage is None:
        return 0, 0
    stat = storage.allocator.stats["all"].allocated_bytes
    return stat.allocated, stat.freed
