"""What profiling a training step costs: step time with the profiler off and on, minigrad and PyTorch.

    .venv-bench/bin/python benchmarks/profiler_overhead.py [--threads 2] [--repeat 15] [--quick]

The issue's goal is <= 10 % step-time overhead with the profiler on. Rows per workload:
off (no profile), on (``profile()``), on + shapes + memory (``record_shapes``, ``profile_memory``), and
PyTorch's step off / on (``torch.profiler.profile`` with CPU activity) where PyTorch is importable.
Overhead is relative to the same library's step with the profiler off. Workloads:

- MLP 64-128-10 on a digits-sized batch of 64: many tiny ops, the worst case for per-op overhead;
- MLP 784-1024-1024-10, batch 256: GEMM-bound, the common case;
- the tiny GPT (d=64, 2 layers, block 64, batch 16): many mid-sized ops, one training step with AdamW.
"""
import argparse
import sys

from common import interleaved_medians, pin_threads, table

_THREADS = 2
for i, a in enumerate(sys.argv):
    if a == "--threads" and i + 1 < len(sys.argv):
        _THREADS = int(sys.argv[i + 1])
pin_threads(_THREADS)

import numpy as np  # noqa: E402

import minigrad as mg  # noqa: E402
from minigrad import nn  # noqa: E402
from minigrad.nn import functional as F  # noqa: E402


def _mlp(sizes):
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


def mg_mlp_step(sizes, batch):
    model = _mlp(sizes)
    opt = mg.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    rng = np.random.default_rng(0)
    x = mg.tensor(rng.standard_normal((batch, sizes[0])).astype(np.float32))
    y = mg.tensor(rng.integers(0, sizes[-1], batch))

    def step():
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    return step


def mg_gpt_step(batch=16, block=64):
    from minigrad.examples.tiny_gpt import TinyGPT, lm_loss
    model = TinyGPT(vocab_size=65, block_size=block, d_model=64, n_layer=2, n_head=4)
    opt = mg.optim.AdamW(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    ids = mg.tensor(rng.integers(0, 65, (batch, block)))
    targets = mg.tensor(rng.integers(0, 65, (batch, block)))

    def step():
        opt.zero_grad()
        lm_loss(model(ids), targets).backward()
        opt.step()
    return step


def torch_mlp_step(torch, sizes, batch):
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers[:-1])
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    rng = np.random.default_rng(0)
    x = torch.tensor(rng.standard_normal((batch, sizes[0])).astype(np.float32))
    y = torch.tensor(rng.integers(0, sizes[-1], batch))

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return step


def profiled(step, profile, n):
    """``n`` steps inside one profile (the profile's start/stop cost is spread over them), per step."""
    def run():
        with profile():
            for _ in range(n):
                step()
    return run


def plain(step, n):
    def run():
        for _ in range(n):
            step()
    return run


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=_THREADS)
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--steps", type=int, default=5, help="steps per timed call (one profile around them)")
    p.add_argument("--quick", action="store_true", help="tiny sizes, one repeat (a smoke test)")
    args = p.parse_args(argv)
    if args.quick:
        args.repeat, args.steps = 1, 1
    try:
        import torch
        torch.set_num_threads(args.threads)
    except ImportError:
        torch = None
        print("(PyTorch not importable: run `make bench` for the side-by-side numbers)", file=sys.stderr)

    full = lambda: mg.profiler.profile(record_shapes=True, profile_memory=True)  # noqa: E731
    workloads = [("MLP 64-128-10, batch 64", lambda: mg_mlp_step((64, 128, 10), 64),
                  lambda: torch_mlp_step(torch, (64, 128, 10), 64)),
                 ("MLP 784-1024-1024-10, batch 256",
                  lambda: mg_mlp_step((64, 64, 10) if args.quick else (784, 1024, 1024, 10), 256),
                  lambda: torch_mlp_step(torch, (784, 1024, 1024, 10), 256)),
                 ("tiny GPT d=64 L=2, 16x64 tokens", lambda: mg_gpt_step(4 if args.quick else 16), None)]
    rows = []
    for name, make, make_torch in workloads:
        step, n = make(), args.steps
        fns = [plain(step, n), profiled(step, mg.profiler.profile, n), profiled(step, full, n)]
        if torch is not None and make_torch is not None and not args.quick:
            tstep = make_torch()
            tprof = lambda: torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])  # noqa
            fns += [plain(tstep, n), profiled(tstep, tprof, n)]
        times = [t / n for t in interleaved_medians(fns, repeat=args.repeat, warmup=1)]
        off = times[0]
        row = [name, f"{off * 1e3:.2f}", f"{times[1] * 1e3:.2f} ({times[1] / off - 1:+.1%})",
               f"{times[2] * 1e3:.2f} ({times[2] / off - 1:+.1%})"]
        if len(times) == 5:
            row += [f"{times[3] * 1e3:.2f}", f"{times[4] * 1e3:.2f} ({times[4] / times[3] - 1:+.1%})"]
        else:
            row += ["-", "-"]
        rows.append(row)
    print(f"profiler overhead per training step (ms, median of {args.repeat}; {args.threads} threads)")
    print(table(rows, ["workload", "minigrad off", "on", "on+shapes+memory", "torch off", "torch on"]))


if __name__ == "__main__":
    main()
