"""The memory/time curve of activation checkpointing: ``checkpoint_sequential`` with 1..n segments.

For a deep MLP (default 32 x Linear(1024)+ReLU at batch 256) and the tiny GPT (its transformer blocks as
the sequence), each segment count gets its peak activation memory, measured exactly from the memory
pool's history (bytes live at once among the blocks forward ops allocate, recomputations included), and
its training-step time (median). PyTorch's ``torch.utils.checkpoint.checkpoint_sequential`` on the same
model shape gives reference times (PyTorch has no CPU memory statistics). Chen et al.'s theory for n
equal layers of one activation each: segment boundaries + one segment = (s - 1) + n / s activations.

    python benchmarks/recompute_curve.py                       # MLP 32x1024 @256 and GPT, all segments
    python benchmarks/recompute_curve.py --only mlp --width 128 --batch 64 --max-segments 16
                                                               # small ops: per-segment overhead shows
    python benchmarks/recompute_curve.py --quick               # tiny sizes (the smoke test)

Step time is timed against s=1 in alternating rounds (``interleaved_medians``: a shared machine's drift
hits both); the goal (issue 21) is <= 1.45x plain for every s <= sqrt(n) on the 32-layer MLP.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from common import interleaved_medians, median_time, pin_threads, table, try_import_torch  # noqa: E402

pin_threads(int(os.environ.get("BENCH_THREADS", "2")))

import minigrad as mg  # noqa: E402
import minigrad.memory as mem  # noqa: E402
from minigrad import nn  # noqa: E402
from minigrad.examples.tiny_gpt import TinyGPT, lm_loss  # noqa: E402
from minigrad.memory import planner  # noqa: E402
from minigrad.utils.checkpoint import checkpoint_sequential  # noqa: E402


def mlp_case(layers, width, batch):
    with mem.enabled("cpu"):                        # parameters in the pool: saving them copies nothing
        model = nn.Sequential(*[nn.Sequential(nn.Linear(width, width), nn.ReLU()) for _ in range(layers)])
        x = mg.randn(batch, width)

    def step(segments):
        model.zero_grad(set_to_none=True)
        checkpoint_sequential(model, segments, x).sum().backward()
    return step, layers


def gpt_case(layers, d_model, batch, block):
    with mem.enabled("cpu"):
        model = TinyGPT(vocab_size=64, block_size=block, d_model=d_model, n_layer=layers, n_head=4, dropout=0.1)
        idx = mg.randint(0, 64, (batch, block + 1))

    def step(segments):
        mg.manual_seed(0)
        model.zero_grad(set_to_none=True)
        ids = idx[:, :-1]
        x = model.drop(model.tok_emb(ids) + model.pos_emb(mg.arange(block)))
        x = checkpoint_sequential(model.blocks, segments, x)
        lm_loss(model.head(model.ln_f(x)), idx[:, 1:]).backward()
    return step, layers


def torch_mlp(torch, layers, width, batch):
    from torch.utils.checkpoint import checkpoint_sequential as ts
    model = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU())
                                  for _ in range(layers)])
    x = torch.randn(batch, width)

    def step(segments):
        model.zero_grad(set_to_none=True)
        ts(model, segments, x, use_reentrant=False).sum().backward()
    return step


def curve(name, step, n, segment_counts, repeat, torch_step=None, timer=time.perf_counter):
    peaks = {s: planner.lower_bound(planner.record(lambda: step(s)).lifetimes, planner.forward_only)
             for s in segment_counts}
    unit, scale = ("MiB", 2 ** 20) if peaks[1] >= 2 ** 22 else ("KiB", 2 ** 10)
    rows = []
    for s in segment_counts:
        t_base, t = interleaved_medians([lambda: step(1), lambda: step(s)], repeat, warmup=1, block=1, timer=timer)
        tt = None if torch_step is None else median_time(lambda: torch_step(s), repeat=repeat, warmup=1,
                                                          timer=timer)
        rows.append((s, f"{peaks[s] / scale:.1f}", f"{peaks[s] / peaks[1]:.0%}", f"{t * 1e3:.1f}",
                     f"{t / t_base:.2f}x", f"{(s - 1) + n / s:.1f} / {n}",
                     "-" if tt is None else f"{tt * 1e3:.1f}"))
    print(f"\n{name}: peak activation memory and step time vs segments (segments=1: no checkpoint)")
    print(table(rows, ["segments", f"peak act {unit}", "of s=1", "step ms", "time / s=1",
                       "theory (s-1)+n/s", "PyTorch step ms"]))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="tiny sizes, every 8th segment count")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--only", default="mlp,gpt")
    p.add_argument("--width", type=int, default=1024, help="MLP width (default %(default)s)")
    p.add_argument("--batch", type=int, default=256, help="MLP batch (default %(default)s)")
    p.add_argument("--max-segments", type=int, default=None, help="time s = 1 .. this only")
    p.add_argument("--cpu-time", action="store_true", help="time with process CPU time (loaded machines; "
                                                           "use one BLAS thread: BENCH_THREADS=1)")
    a = p.parse_args(argv)
    timer = time.process_time if a.cpu_time else time.perf_counter
    torch = try_import_torch(int(os.environ.get("BENCH_THREADS", "2")))
    if "mlp" in a.only:
        L, W, B = (8, 128, 32) if a.quick else (32, a.width, a.batch)
        step, n = mlp_case(L, W, B)
        counts = [1, 2, 4, 8] if a.quick else list(range(1, min(L, a.max_segments or L) + 1))
        # segments=1 is a plain run in PyTorch's semantics too: the last segment is never checkpointed
        curve(f"MLP {L} x Linear({W})+ReLU, batch {B}", step, n, counts, 1 if a.quick else a.repeat,
              None if torch is None else torch_mlp(torch, L, W, B), timer)
    if "gpt" in a.only:
        L, D, B, T = (4, 32, 2, 16) if a.quick else (8, 128, 16, 128)
        step, n = gpt_case(L, D, B, T)
        counts = [1, 2, 4] if a.quick else list(range(1, L + 1))
        curve(f"tiny GPT {L} blocks, d_model {D}, batch {B} x {T} tokens", step, n, counts,
              1 if a.quick else a.repeat, timer=timer)


if __name__ == "__main__":
    main()
