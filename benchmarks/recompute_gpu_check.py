"""Recomputation and planning on a CUDA device (``make gpu-check``; also runs on the emulator).

1. gradients: an MLP with dropout, plain vs ``checkpoint`` vs ``checkpoint_sequential`` (every segment
   count): the largest difference (0 expected: the same kernels on the same inputs, RNG replayed);
2. memory: the 32-layer MLP (1024 wide, batch 256) on the device's pool: peak activation bytes (forward ops,
   from the pool's history) and step time, plain vs sqrt(n)-ish segment counts;
3. the planner on the device: one training step's arena vs the pool's peak reserved vs the lower bound,
   and whether replaying the step at the planned offsets gives identical loss and gradients.

    python benchmarks/recompute_gpu_check.py [--device cuda] [--quick]
"""
import argparse
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(__file__))
from common import table  # noqa: E402

import numpy as np  # noqa: E402

import minigrad as mg  # noqa: E402
import minigrad.memory as mem  # noqa: E402
from minigrad import nn  # noqa: E402
from minigrad.memory import planner  # noqa: E402
from minigrad.nn import functional as F  # noqa: E402
from minigrad.utils.checkpoint import checkpoint, checkpoint_sequential  # noqa: E402


def gradients(dev):
    model = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(64, 64), nn.ReLU(), nn.Dropout(0.3))]).to(dev)
    x = mg.randn(32, 64, device=dev, requires_grad=True)

    def grads(run):
        mg.manual_seed(1)
        model.zero_grad(set_to_none=True)
        x.grad = None
        run().sum().backward()
        return [p.grad.cpu().numpy() for p in model.parameters()] + [x.grad.cpu().numpy()]
    ref = grads(lambda: model(x))
    rows = [("checkpoint", max(float(np.abs(a - b).max()) for a, b in zip(ref, grads(lambda: checkpoint(model, x)))))]
    for s in range(1, len(model) + 1):
        got = grads(lambda: checkpoint_sequential(model, s, x))
        rows.append((f"checkpoint_sequential({s})", max(float(np.abs(a - b).max()) for a, b in zip(ref, got))))
    print(table([(n, f"{d:.3g}") for n, d in rows], ["run", "max |grad - plain grad|"]))
    return all(d == 0 for _, d in rows)


def memory(dev, quick):
    L, W, B = (8, 128, 32) if quick else (32, 1024, 256)
    with mem.enabled(dev):
        model = nn.Sequential(*[nn.Sequential(nn.Linear(W, W), nn.ReLU()) for _ in range(L)]).to(dev)
        x = mg.randn(B, W, device=dev)

    def step(s):
        model.zero_grad(set_to_none=True)
        (model(x) if s is None else checkpoint_sequential(model, s, x)).sum().backward()
        mg.cuda.synchronize() if dev.type == "cuda" else None
    rows, base = [], None
    for s in (None, 4, 6, 8):
        peak = planner.lower_bound(planner.record(lambda: step(s), device=dev).lifetimes, planner.forward_only)
        step(s)
        t0 = time.perf_counter()
        for _ in range(3):
            step(s)
        t = (time.perf_counter() - t0) / 3
        base = base or (peak, t)
        rows.append(("plain" if s is None else s, f"{peak / 2**20:.1f}", f"{peak / base[0]:.0%}",
                     f"{t * 1e3:.1f}", f"{t / base[1] - 1:+.0%}"))
    print(f"{L} x Linear({W})+ReLU, batch {B}, on {dev}")
    print(table(rows, ["segments", "peak act MiB", "of plain", "step ms", "time vs plain"]))
    return True


def planned(dev):
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Dropout(0.1), nn.Linear(512, 10)).to(dev)
    x, y = mg.randn(128, 256, device=dev), mg.randint(0, 10, (128,), device=dev)

    def step():
        mg.manual_seed(0)
        model.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        return [loss.detach().cpu().numpy()] + [p.grad.cpu().numpy() for p in model.parameters()]
    step()
    trace = planner.record(step, device=dev)
    plan = planner.plan(trace.lifetimes)
    again = planner.replay(step, trace.lifetimes, plan, device=dev)
    same = all(np.array_equal(a, b) for a, b in zip(trace.result, again))
    print(f"planner on {dev}: {len(trace.lifetimes)} tensors, arena {plan.arena_size / 2**20:.2f} MiB, pool peak "
          f"reserved {trace.peak_reserved / 2**20:.2f} MiB, lower bound "
          f"{planner.lower_bound(trace.lifetimes) / 2**20:.2f} MiB, replay identical: {same}")
    return same


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda")
    p.add_argument("--quick", action="store_true")
    a = p.parse_args(argv)
    dev = mg.device(a.device)
    ok = True
    for name, fn in (("gradients", lambda: gradients(dev)), ("memory", lambda: memory(dev, a.quick)),
                     ("planner", lambda: planned(dev))):
        print(f"-- {name}")
        try:
            ok = fn() and ok
        except Exception:
            traceback.print_exc()
            ok = False
    print("recompute gpu check:", "ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
