"""``profile``, ``record_function`` and ``schedule``: the profiler's API, with PyTorch's names.

``profile`` installs a recorder (``_recorder.py``) on the core's extension points for its duration; its
wrappers time every op's forward and every node's backward. When no profile is recording, nothing is
registered, so ops pay nothing beyond the core's one flag check.

Deliberate differences from ``torch.profiler``: a backward event is named ``<op>.backward``
(``matmul.backward``, the label the memory pool gives the blocks it allocates) rather than
``MmBackward0``; memory is counted through minigrad's pool, so ``profile_memory=True`` switches the pool
on for cpu for the profile's duration when it is off (enable it yourself on cuda); ``activities`` is
accepted and ignored (ops on any device are recorded; device times come with CUDA events on a GPU); a
profile records the thread that started it unless ``all_threads=True`` (PyTorch's records every thread):
mode state is per thread in minigrad, and a profile is a mode.
"""
import enum
import functools

from . import _recorder
from .events import EventList

__all__ = ["ProfilerAction", "ProfilerActivity", "profile", "record_function", "schedule"]


class ProfilerActivity(enum.Enum):
    CPU = "cpu"
    CUDA = "cuda"


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def schedule(*, wait, warmup, active, repeat=0, skip_first=0):
    """Which steps to record, as ``torch.profiler.schedule``: skip ``skip_first`` steps, then cycles of
    ``wait`` idle steps, ``warmup`` steps recorded and thrown away, ``active`` steps recorded (the last one
    also saves: ``on_trace_ready`` is called); ``repeat`` cycles (0: forever)."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise ValueError(f"schedule: wait, warmup, repeat, skip_first must be >= 0 and active > 0 "
                         f"(got wait={wait}, warmup={warmup}, active={active}, repeat={repeat}, "
                         f"skip_first={skip_first})")
    cycle = wait + warmup + active

    def action(step):
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if repeat and step // cycle >= repeat:
            return ProfilerAction.NONE
        k = step % cycle
        if k < wait:
            return ProfilerAction.NONE
        if k < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD_AND_SAVE if k == cycle - 1 else ProfilerAction.RECORD

    return action


_RECORDING = (ProfilerAction.WARMUP, ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)


class profile:
    """Record what runs inside ``with profile(...) as prof:``.

    - ``record_shapes``: keep each op's input shapes (``key_averages(group_by_input_shape=True)``);
    - ``profile_memory``: count the pool bytes each op allocates and frees (CPU Mem / CUDA Mem columns);
    - ``with_stack``: keep the Python call stack of each event (outside minigrad) in ``event.stack``;
    - ``schedule``/``on_trace_ready``: with a schedule, call ``prof.step()`` once per training step; the
      steps the schedule marks are recorded (each inside a ``ProfilerStep#N`` range) and
      ``on_trace_ready(prof)`` is called at the end of each active window;
    - ``all_threads``: record every thread's ops, each on its own track (PyTorch's profiler does); by
      default only the thread that started the profile is recorded, so a profile in one thread does
      not see (or time) another thread's work.

    Results: ``prof.events()``, ``prof.key_averages()``, ``prof.export_chrome_trace(path)``.
    """

    def __init__(self, *, activities=None, schedule=None, on_trace_ready=None, record_shapes=False,
                 profile_memory=False, with_stack=False, all_threads=False):
        self.activities = activities
        self.all_threads = bool(all_threads)
        self.schedule, self.on_trace_ready = schedule, on_trace_ready
        self.record_shapes, self.profile_memory, self.with_stack = record_shapes, profile_memory, with_stack
        self.step_num = 0
        self._recorder = None
        self._events = EventList()
        self._action = ProfilerAction.NONE
        self._step_range = None
        self._pool = None

    # --- life cycle -----------------------------------------------------------------------------------
    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def start(self):
        if self.profile_memory:
            from .. import memory
            self._pool = memory.enabled("cpu")
            self._pool.__enter__()
        self.step_num = 0
        self._action = self.schedule(0) if self.schedule is not None else ProfilerAction.RECORD
        if self._action in _RECORDING:
            self._begin()

    def stop(self):
        try:
            if self._recorder is not None:
                self._finish(save=self.schedule is None or self._action is not ProfilerAction.WARMUP)
        finally:
            if self._pool is not None:
                self._pool.__exit__(None, None, None)
                self._pool = None

    def step(self):
        """Mark the end of a training step; with a schedule, move to the next action."""
        if self.schedule is None:
            return
        previous = self._action
        self.step_num += 1
        self._action = self.schedule(self.step_num)
        if self._recorder is not None:
            self._end_step_range()
            if previous is ProfilerAction.RECORD_AND_SAVE or self._action not in _RECORDING:
                self._finish(save=previous is not ProfilerAction.WARMUP)
            elif previous is ProfilerAction.WARMUP and self._action is not ProfilerAction.WARMUP:
                self._discard()             # warmup events are thrown away
        if self._recorder is None and self._action in _RECORDING:
            self._begin()
        elif self._recorder is not None:
            self._begin_step_range()

    # --- recording windows ------------------------------------------------------------------------------
    def _begin(self):
        self._recorder = _recorder._Recorder(self.record_shapes, self.profile_memory, self.with_stack,
                                             self.all_threads)
        self._recorder.install()
        self._begin_step_range()

    def _begin_step_range(self):
        if self.schedule is not None:
            self._step_range = self._recorder.begin(f"ProfilerStep#{self.step_num}", "user_annotation")

    def _end_step_range(self):
        if self._step_range is not None:
            self._recorder.end(self._step_range)
            self._step_range = None

    def _discard(self):
        self._recorder.uninstall()
        self._recorder = None

    def _finish(self, save):
        self._end_step_range()
        rec, self._recorder = self._recorder, None
        events = rec.uninstall()
        if save:
            self._events = events
            if self.on_trace_ready is not None:
                self.on_trace_ready(self)

    # --- results ------------------------------------------------------------------------------------------
    def events(self):
        """Every event of the last recorded window, in the order they began."""
        return self._events

    def key_averages(self, group_by_input_shape=False):
        return self._events.key_averages(group_by_input_shape)

    def export_chrome_trace(self, path):
        """Write the Trace Event JSON that Perfetto (ui.perfetto.dev) and chrome://tracing open."""
        self._events.export_chrome_trace(path)


class record_function:
    """A named user range: ``with record_function("data"):`` or ``@record_function("step")``. Costs one
    context-variable read when no profile is recording this thread."""

    def __init__(self, name):
        self.name = name
        self._event = None

    def __enter__(self):
        rec = _recorder.active()
        if rec is not None:
            self._event = (rec, rec.begin(self.name, "user_annotation"))
        return self

    def __exit__(self, *exc):
        if self._event is not None:
            rec, ev = self._event
            rec.end(ev)
            self._event = None
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with record_function(self.name):
                return fn(*args, **kwargs)
        return wrapper
