"""Memory history: what was allocated and freed, when, and which op caused it.

While recording, the allocator appends one event per alloc, free, segment_alloc, segment_free and oom.
Events are plain dicts (JSON-serialisable) so that snapshots can be saved, sent to an autograder and
plotted (``plot.plot_timeline``).

*Cause.* Each allocation is labelled with the op that made it and the innermost ``label(...)`` in force:

- the op comes from the storage adapter's ``current_op`` attribute, which minigrad's core sets around
  each op (see ``minigrad.memory``'s docstring for the exact hook);
- labels come from ``with minigrad.memory.label('forward'):`` blocks, for phases of a training step.

``cause`` is the op when there is one, else the label, else ``"unlabelled"``. A free event carries the
op, label and cause of the allocation it undoes, so a timeline can subtract it from the right band.
"""
import time
from collections import deque
from contextlib import contextmanager

_labels = []   # stack of label() names, innermost last


@contextmanager
def label(name):
    """Label every allocation made inside the block (``with label('forward'): ...``)."""
    _labels.append(str(name))
    try:
        yield
    finally:
        _labels.pop()


def current_label():
    return _labels[-1] if _labels else None


class MemoryHistory:
    """A bounded log of allocator events (the oldest are dropped beyond ``max_entries``)."""

    def __init__(self, max_entries=100_000):
        self.events = deque(maxlen=max_entries)
        self.seq = 0
        self.t0 = time.perf_counter()
        self.live_labels = {}    # address -> label of each live block allocated while recording

    def record(self, action, allocator, address, size, requested, pool, op):
        if action == "free":
            lab = self.live_labels.pop(address, None)
        else:
            lab = _labels[-1] if _labels else None
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
        })
        self.seq += 1
