"""What a profile holds: one ``FunctionEvent`` per timed range, and their averages per name.

An event is an op's forward (``kind="cpu_op"``, named after the op: ``matmul``), a node's backward
(``"backward"``: ``matmul.backward``, the name the memory pool labels its blocks with), a user range
(``"user_annotation"``, from ``record_function``) or a wait for the DataLoader (``"dataloader"``). Events
of one thread nest: ``parent`` is the range that was open when the event began, ``children`` the ranges
opened inside it. Times are kept in integer nanoseconds and shown in microseconds, as PyTorch shows them.

Self time is an event's time minus its children's: where a step's time is actually spent. Memory is the
net of what the pool handed out and took back during the event (PyTorch's "CPU Mem"); ``allocated_bytes``
is what it handed out.
"""
from collections import OrderedDict

__all__ = ["FunctionEvent", "FunctionEventAvg", "EventList"]


class FunctionEvent:
    """One timed range. ``cpu_time_total``/``self_cpu_time_total``/``cuda_time_total`` are microseconds."""

    __slots__ = ("name", "kind", "thread", "start_ns", "end_ns", "device", "input_shapes", "stack",
                 "parent", "children", "memory_usage", "allocated_bytes", "device_start_ns", "device_ns",
                 "_mem0", "_cuda")

    def __init__(self, name, kind, thread, device=None, input_shapes=None, stack=None, parent=None):
        self.name, self.kind, self.thread, self.device = name, kind, thread, device
        self.input_shapes, self.stack, self.parent = input_shapes, stack, parent
        self.children = []
        self.start_ns = self.end_ns = 0
        self.memory_usage = self.allocated_bytes = 0
        self.device_start_ns = self.device_ns = None  # from CUDA events, after the final synchronise
        self._mem0 = self._cuda = None

    @property
    def cpu_time_total(self):
        return (self.end_ns - self.start_ns) / 1e3

    @property
    def self_cpu_time_total(self):
        return (self.end_ns - self.start_ns - sum(c.end_ns - c.start_ns for c in self.children)) / 1e3

    @property
    def cuda_time_total(self):
        return 0.0 if self.device_ns is None else self.device_ns / 1e3

    @property
    def self_cuda_time_total(self):
        """Device time of this op alone: ops do not launch ops here, so only user ranges have children
        that ran on the device, and a user range itself launches nothing."""
        return 0.0 if self.kind == "user_annotation" else self.cuda_time_total

    @property
    def device_type(self):
        return "cuda" if self.device is not None and self.device.startswith("cuda") else "cpu"

    @property
    def self_memory_usage(self):
        return self.memory_usage - sum(c.memory_usage for c in self.children)

    def __repr__(self):
        return (f"<FunctionEvent {self.name} ({self.kind}) thread={self.thread} "
                f"cpu_time={self.cpu_time_total:.3f}us children={len(self.children)}>")


class FunctionEventAvg:
    """The events of one key (name, and input shapes when grouped by them), summed."""

    def __init__(self, key, input_shapes=None):
        self.key, self.input_shapes = key, input_shapes
        self.count = 0
        self.cpu_time_total = self.self_cpu_time_total = 0.0
        self.cuda_time_total = self.self_cuda_time_total = 0.0
        self.cpu_memory_usage = self.self_cpu_memory_usage = 0
        self.cuda_memory_usage = self.self_cuda_memory_usage = 0

    def add(self, ev):
        self.count += 1
        self.cpu_time_total += ev.cpu_time_total
        self.self_cpu_time_total += ev.self_cpu_time_total
        self.cuda_time_total += ev.cuda_time_total
        self.self_cuda_time_total += ev.self_cuda_time_total
        if ev.device_type == "cuda":
            self.cuda_memory_usage += ev.memory_usage
            self.self_cuda_memory_usage += ev.self_memory_usage
        else:
            self.cpu_memory_usage += ev.memory_usage
            self.self_cpu_memory_usage += ev.self_memory_usage

    @property
    def cpu_time(self):
        """Average CPU time per call (microseconds)."""
        return self.cpu_time_total / max(self.count, 1)

    @property
    def cuda_time(self):
        return self.cuda_time_total / max(self.count, 1)

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key} self_cpu_time={self.self_cpu_time_total:.3f}us "
                f"cpu_time={self.cpu_time_total:.3f}us count={self.count}>")


class EventList(list):
    """A list of events (``prof.events()``) or of averages (``prof.key_averages()``), with ``table()``."""

    def key_averages(self, group_by_input_shape=False):
        """One ``FunctionEventAvg`` per name (per name and input shapes with ``group_by_input_shape``),
        in order of first appearance."""
        groups = OrderedDict()
        for ev in self:
            shapes = ev.input_shapes if group_by_input_shape else None
            key = (ev.name, str(shapes) if shapes is not None else None)
            avg = groups.get(key)
            if avg is None:
                avg = groups[key] = FunctionEventAvg(ev.name, shapes)
            avg.add(ev)
        return EventList(groups.values())

    def table(self, sort_by=None, row_limit=100, max_name_column_width=55, header=None):
        """PyTorch's profiler table. ``sort_by``: an attribute such as ``"self_cpu_time_total"``,
        ``"cpu_time_total"``, ``"cuda_time_total"``, ``"self_cpu_memory_usage"`` or ``"count"``."""
        from .table import build_table
        rows = []      # raw events are shown one per row, like PyTorch's ``prof.events().table()``
        for ev in self:
            if isinstance(ev, FunctionEvent):
                avg = FunctionEventAvg(ev.name, ev.input_shapes)
                avg.add(ev)
                ev = avg
            rows.append(ev)
        return build_table(rows, sort_by=sort_by, row_limit=row_limit,
                           max_name_column_width=max_name_column_width, header=header)

    @property
    def self_cpu_time_total(self):
        return sum(e.self_cpu_time_total for e in self)

    def export_chrome_trace(self, path):
        from .chrome_trace import export_chrome_trace
        export_chrome_trace(self, path)
