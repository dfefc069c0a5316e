"""The Trace Event format (the JSON that Perfetto and chrome://tracing open).

One complete event (``"ph": "X"``, start ``ts`` and ``dur`` in microseconds) per range, on the track
(``tid``) of the thread that ran it, so forward ops, backward nodes and DataLoader waits appear nested
under the user ranges around them. Ops timed with CUDA events also appear on a track of their own
process, named after the GPU. Metadata events (``"ph": "M"``) name the processes and threads.
"""
import json
import os

_CATEGORY = {"cpu_op": "cpu_op", "backward": "cpu_op", "user_annotation": "user_annotation",
             "dataloader": "dataloader"}


def trace_events(events):
    """The list of trace events for a list of FunctionEvents (what ``export_chrome_trace`` writes)."""
    pid = os.getpid()
    if not events:
        return [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "minigrad"}}]
    origin = min(e.start_ns for e in events)
    out = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "minigrad (host)"}}]
    threads, gpus = set(), {}
    for e in events:
        threads.add(e.thread)
        args = {"kind": e.kind}
        if e.device is not None:
            args["Device"] = e.device
        if e.input_shapes is not None:
            args["Input Dims"] = e.input_shapes
        if e.memory_usage or e.allocated_bytes:
            args["Bytes allocated"], args["Net bytes"] = e.allocated_bytes, e.memory_usage
        if e.stack:
            args["Call stack"] = ";".join(e.stack)
        out.append({"ph": "X", "cat": _CATEGORY.get(e.kind, e.kind), "name": e.name, "pid": pid,
                    "tid": e.thread, "ts": round((e.start_ns - origin) / 1e3, 3),
                    "dur": round((e.end_ns - e.start_ns) / 1e3, 3), "args": args})
        if e.device_ns is not None:
            gpu_pid = gpus.setdefault(e.device, pid + 1 + len(gpus))
            out.append({"ph": "X", "cat": "kernel", "name": e.name, "pid": gpu_pid, "tid": 0,
                        "ts": round(e.device_start_ns / 1e3, 3), "dur": round(e.device_ns / 1e3, 3),
                        "args": {"Device": e.device}})
    for tid in sorted(threads):
        out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": f"thread {tid}"}})
    for device, gpu_pid in gpus.items():
        out.append({"ph": "M", "name": "process_name", "pid": gpu_pid, "tid": 0, "args": {"name": device}})
        out.append({"ph": "M", "name": "thread_name", "pid": gpu_pid, "tid": 0, "args": {"name": "stream 0"}})
    return out


def export_chrome_trace(events, path):
    with open(path, "w") as f:
        json.dump({"traceEvents": trace_events(events), "displayTimeUnit": "ms"}, f)
