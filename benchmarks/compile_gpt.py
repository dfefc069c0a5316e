"""The tiny GPT training step, eager vs mg.compile (issue 15): is compiling at least not slower?

    .venv/bin/python benchmarks/compile_gpt.py [--repeat 15] [--threads 2] [--d-model 64] [--block-size 64]

The model's forward is compiled (mg.compile(model)); backward and the AdamW step run as usual (replayed
ops record autograd exactly as eager ones, so backward is the same code). Replay skips the Python of
the modules and functional layer and runs fused elementwise kernels where chains exist.
"""
import argparse
import sys

from common import interleaved_medians, pin_threads, table

pin_threads(int(sys.argv[sys.argv.index("--threads") + 1]) if "--threads" in sys.argv else 2)

import numpy as np  # noqa: E402

import minigrad as mg  # noqa: E402
from minigrad import optim  # noqa: E402
from minigrad.compile import fused_kernels  # noqa: E402
from minigrad.examples.tiny_gpt import TinyGPT, lm_loss  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--block-size", type=int, default=64)
    ap.add_argument("--batch", type=int, default=16)
    args = ap.parse_args()
    mg.manual_seed(0)
    V = 65
    model = TinyGPT(V, args.block_size, d_model=args.d_model, n_layer=2, n_head=4)
    opt = optim.AdamW(model.parameters(), lr=1e-3)
    compiled = mg.compile(model)
    x = mg.randint(0, V, (args.batch, args.block_size))
    y = mg.randint(0, V, (args.batch, args.block_size))

    def step(fwd):
        def run():
            opt.zero_grad()
            loss = lm_loss(fwd(x), y)
            loss.backward()
            opt.step()
            return loss
        return run
    eager_loss = lm_loss(model(x), y).item()
    assert np.isclose(lm_loss(compiled(x), y).item(), eager_loss, rtol=1e-6)
    t_eager, t_comp = interleaved_medians([step(model), step(compiled)], repeat=args.repeat)
    graph = compiled.graphs()[0]
    print(f"tiny GPT d={args.d_model}, T={args.block_size}, batch {args.batch}: {len(graph)} ops in the compiled "
          f"graph, {len(fused_kernels(graph))} fused kernels; "
          f"stats {compiled.stats}")
    print(table([("eager", f"{t_eager * 1e3:.1f}", "1.00"), ("mg.compile(model)", f"{t_comp * 1e3:.1f}",
                                                           f"{t_eager / t_comp:.2f}")],
                 ["training step", "ms/step", "speed-up"]))


if __name__ == "__main__":
    main()
