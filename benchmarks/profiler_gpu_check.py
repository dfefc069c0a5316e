"""On a real GPU: op times come from CUDA events, the trace has a device track, and the profile
synchronises once at the end. Prints a table and the profiler's overhead on a GPU MLP step.

    python3 benchmarks/profiler_gpu_check.py        (make gpu-check runs it; exits 1 on a failed check)
"""
import json
import os
import sys
import tempfile
import time

import minigrad as mg
from minigrad import nn
from minigrad.nn import functional as F


def main():
    if not mg.cuda.is_available() or mg.cuda.is_emulated():
        sys.exit("profiler_gpu_check needs a real CUDA device")
    dev = "cuda"
    model = nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 10)).to(dev)
    opt = mg.optim.SGD(model.parameters(), lr=0.01)
    x, y = mg.randn(512, 1024, device=dev), mg.randint(0, 10, (512,), device=dev)

    def step():
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()

    for _ in range(5):
        step()
    mg.cuda.synchronize()
    with mg.profiler.profile() as prof:
        with mg.profiler.record_function("step"):
            step()
    ops = [e for e in prof.events() if e.kind in ("cpu_op", "backward")]
    failures = []
    if not ops or any(e.device_ns is None for e in ops):
        failures.append("some cuda op has no CUDA-event time")
    if not any(e.device_ns > 0 for e in ops):
        failures.append("every CUDA-event time is zero")
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=12))
    path = os.path.join(tempfile.mkdtemp(), "trace.json")
    prof.export_chrome_trace(path)
    trace = json.load(open(path))["traceEvents"]
    if not any(e.get("cat") == "kernel" for e in trace):
        failures.append("the trace has no device track")

    def per_step(profiled, n=50):
        t0 = time.perf_counter()
        if profiled:
            with mg.profiler.profile():
                for _ in range(n):
                    step()
        else:
            for _ in range(n):
                step()
        mg.cuda.synchronize()
        return (time.perf_counter() - t0) / n
    off = min(per_step(False) for _ in range(3))
    on = min(per_step(True) for _ in range(3))
    print(f"GPU MLP step: off {off * 1e3:.3f} ms, profiled {on * 1e3:.3f} ms ({on / off - 1:+.1%})")
    for f in failures:
        print("FAILED:", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
