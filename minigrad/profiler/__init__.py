"""minigrad.profiler: where a training step's time (and memory) goes, with PyTorch's names.

    import minigrad as mg
    with mg.profiler.profile(record_shapes=True, profile_memory=True) as prof:
        with mg.profiler.record_function("forward"):
            loss = model(x).sum()
        with mg.profiler.record_function("backward"):
            loss.backward()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10))
    prof.export_chrome_trace("trace.json")     # open in ui.perfetto.dev or chrome://tracing

Every op's forward and every node's backward is an event (name, input shapes, device, wall time, pool
bytes); ``record_function`` adds user ranges; the DataLoader's waits for a batch are events of their own.
On a GPU, op times come from CUDA events read once when the profile stops (never a synchronise per op).
For training loops, ``schedule(wait=1, warmup=1, active=3)`` with ``prof.step()`` records a few steps.

    events.py        FunctionEvent, FunctionEventAvg, EventList (key_averages, table)
    table.py         the table, as PyTorch prints it
    chrome_trace.py  the Trace Event JSON
    profiler.py      profile, record_function, schedule
    _recorder.py     the wrappers on the core's extension points, stacks, pool counters, CUDA events
"""
from .events import EventList, FunctionEvent, FunctionEventAvg
from .profiler import ProfilerAction, ProfilerActivity, profile, record_function, schedule

__all__ = ["EventList", "FunctionEvent", "FunctionEventAvg", "ProfilerAction", "ProfilerActivity", "profile",
           "record_function", "schedule"]
