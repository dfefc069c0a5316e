"""Memory history: what was allocated and freed, when, and which op caused it.

While recording, the allocator appends one event per alloc, free, segment_alloc, segment_free and oom.
Events are plain dicts (JSON-serialisable) so that snapshots can be saved, sent to an autograder and
plotted (``plot.plot_timeline``).

*Cause.* Each allocation is labelled with the op that made it and the innermost ``label(...)`` in force:

- the op comes from the storage adapter's ``current_op`` attribute, which ``op_labels.py`` sets around
  each op (see ``minigrad.memory``'s docstring for the exact hook);
- labels come from ``with minigrad.memory.label('forward'):`` blocks, for phases of a training step.

Both are per thread (``contextvars``), like every mode: two threads sharing a pool label their own
allocations (data-parallel ranks run as threads in the course's simulator).

``cause`` is the op when there is one, else the label, else ``"unlabelled"``. A free event carries the
op, label and cause of the allocation it undoes, so a timeline can subtract it from the right band.
"""
import contextvars
import time
from collections import deque
from contextlib import contextmanager

_label = contextvars.ContextVar("minigrad.memory.label", default=None)   # the innermost label() name


@contextmanager
def label(name):
    """Label every allocation made inside the block (``with label('forward'): ...``), in this thread."""
    token = _label.set(str(name))
    try:
        yield
    finally:
        _label.reset(token)


class OpLabelled:
    """Base of the storage adapters: ``current_op``, the op whose allocations are being made (set by
    ``op_labels.py`` around each op), per thread."""

    def __init__(self):
        self._current_op = contextvars.ContextVar("minigrad.memory.current_op", default=None)

    @property
    def current_op(self):
        return self._current_op.get()

    @current_op.setter
    def current_op(self, op):
        self._current_op.set(op)


class MemoryHistory:
    """A bounded log of allocator events (the oldest are dropped beyond ``max_entries``)."""

    def __init__(self, max_entries=100_000):
        self.events = deque(maxlen=max_entries)
        self.seq = 0
        self.t0 = time.perf_counter()
        self.live_labels = {}    # address -> label of each live block allocated while recording

    def record(self, action, allocator, address, size, requested, pool, op, borrowed=False):
        if action == "free":
            lab = self.live_labels.pop(address, None)
        else:
            lab = _label.get()
            if action == "alloc":
                self.live_labels[address] = lab
        self.events.append({
            "seq": self.seq,
            "time": time.perf_counter() - self.t0,   # seconds since recording started
            "action": action,                        # alloc | free | segment_alloc | segment_free | oom
            "address": address,
            "size": size,                            # rounded block size (segment size for segment_*)
            "requested": requested,
            "pool": pool,
            "op": op,
            "label": lab,
            "cause": op or lab or "unlabelled",
            "allocated_bytes": allocator.allocated_bytes(),   # totals after the event
            "reserved_bytes": allocator.reserved_bytes(),
            "borrowed": borrowed,                    # an alloc whose memory the caller lent (allocator.borrow)
        })
        self.seq += 1
