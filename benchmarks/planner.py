"""Static planning vs a caching pool: one training step's memory, planned offline into one arena.

For an MLP, a CNN and the tiny GPT, one training step (forward, loss, backward) is recorded with the
memory pool's history; the greedy-by-size planner packs its tensors into one arena. Columns: the arena,
the caching pool's peak reserved bytes for the same step (a fresh pool: segments rounded to 2 MiB, blocks
to 512 B, small requests from 2 MiB small-pool segments), the pool's peak allocated bytes and the live-
bytes lower bound (the most bytes live at once: no plan can use less), the planning time, and whether
replaying the step at the planned offsets gave bit-identical loss and gradients. Bytes are exact and
deterministic; only the planning time depends on the machine.

    python benchmarks/planner.py            # MLP 784-1024-1024-10 @256, CNN @64, tiny GPT @16x128
    python benchmarks/planner.py --quick    # tiny sizes (the smoke test)
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from common import pin_threads, table  # noqa: E402

pin_threads(int(os.environ.get("BENCH_THREADS", "2")))

import numpy as np  # noqa: E402

import minigrad as mg  # noqa: E402
from minigrad import nn  # noqa: E402
from minigrad.examples.tiny_gpt import TinyGPT, lm_loss  # noqa: E402
from minigrad.memory import planner  # noqa: E402
from minigrad.nn import functional as F  # noqa: E402


def mlp(q):
    width, batch = (64, 16) if q else (1024, 256)
    model = nn.Sequential(nn.Linear(784, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                          nn.Linear(width, 10))
    x, y = mg.randn(batch, 784), mg.randint(0, 10, (batch,))
    return f"MLP 784-{width}-{width}-10 @{batch}", model, lambda: F.cross_entropy(model(x), y)


def cnn(q):
    batch = 8 if q else 64
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(32 * 7 * 7, 10))
    x, y = mg.randn(batch, 1, 28, 28), mg.randint(0, 10, (batch,))
    return f"CNN 28x28 @{batch}", model, lambda: F.cross_entropy(model(x), y)


def gpt(q):
    layers, d, batch, block = (2, 32, 2, 16) if q else (4, 128, 16, 128)
    model = TinyGPT(vocab_size=64, block_size=block, d_model=d, n_layer=layers, n_head=4, dropout=0.1)
    idx = mg.randint(0, 64, (batch, block + 1))
    return f"tiny GPT {layers}x{d} @{batch}x{block}", model, lambda: lm_loss(model(idx[:, :-1]), idx[:, 1:])


def measure(name, model, loss_fn):
    def step():
        mg.manual_seed(0)
        model.zero_grad(set_to_none=True)
        loss = loss_fn()
        loss.backward()
        return [loss.detach().numpy().copy()] + [p.grad.numpy().copy() for p in model.parameters()]
    step()                                      # warm-up: lazily built state is not part of the step
    trace = planner.record(step)
    t0 = time.perf_counter()
    plan = planner.plan(trace.lifetimes)
    t_plan = time.perf_counter() - t0
    bound = planner.lower_bound(trace.lifetimes)
    again = planner.replay(step, trace.lifetimes, plan)
    same = all(np.array_equal(a, b) for a, b in zip(trace.result, again))
    mib = lambda n: f"{n / 2**20:.2f}"          # noqa: E731
    return (name, len(trace.lifetimes), mib(plan.arena_size), mib(trace.peak_reserved),
            mib(trace.peak_allocated), mib(bound), f"{plan.arena_size / bound:.3f}",
            f"{trace.peak_reserved / bound:.2f}", f"{t_plan * 1e3:.0f}", "yes" if same else "NO")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true")
    a = p.parse_args(argv)
    mg.manual_seed(0)
    rows = [measure(*make(a.quick)) for make in (mlp, cnn, gpt)]
    print(table(rows, ["step", "tensors", "arena MiB", "pool reserved MiB", "pool allocated MiB",
                       "lower bound MiB", "arena/bound", "reserved/bound", "plan ms", "replay identical"]))


if __name__ == "__main__":
    main()
