"""The tiny GPT training step, eager vs mg.compile (issue 15), side by side with PyTorch eager / torch.compile.

    .venv/bin/python benchmarks/compile_gpt.py --quick                       # ~10 s: a smoke run
    .venv/bin/python benchmarks/compile_gpt.py [--repeat 15] [--threads 2] [--d-model 64] [--block-size 64]
    PYTHONPATH=. /work/main/.venv-bench/bin/python benchmarks/compile_gpt.py # adds PyTorch (+ torch.compile)

The model's forward is compiled (mg.compile(model)); backward and the AdamW step run as usual (replayed
ops record autograd exactly as eager ones, so backward is the same code). Replay skips the Python of
the modules and functional layer and runs fused elementwise kernels where chains exist (the tiny GPT has
none of two or more ops: GELU and layer norm are single ops, each residual add stands alone). PyTorch runs
the same model (same shapes, GPT-2's init, AdamW) eagerly and under torch.compile (forward and backward
through inductor; left out, with the reason, where it cannot run, e.g. without a C++ compiler).
All variants are timed in one interleaved window; the speed-ups are against minigrad eager.
"""
import argparse
import sys
import time

from common import interleaved_medians, pin_threads, quiet_inductor, table, try_import_torch

pin_threads(int(sys.argv[sys.argv.index("--threads") + 1]) if "--threads" in sys.argv else 2)

import numpy as np  # noqa: E402

import minigrad as mg  # noqa: E402
from minigrad import optim  # noqa: E402
from minigrad.compiler import fused_kernels  # noqa: E402
from minigrad.examples.tiny_gpt import TinyGPT, lm_loss  # noqa: E402

V = 65   # the characters of the tiny GPT's corpus


def minigrad_steps(args, x, y):
    """(eager step, compiled step, compiled model); the two train separate but identical models."""
    def make():
        mg.manual_seed(0)
        model = TinyGPT(V, args.block_size, d_model=args.d_model, n_layer=args.n_layer, n_head=4)
        return model, optim.AdamW(model.parameters(), lr=1e-3)
    (model, opt), (model_c, opt_c) = make(), make()
    compiled = mg.compile(model_c)
    tx, ty = mg.tensor(x), mg.tensor(y)
    assert np.isclose(lm_loss(compiled(tx), ty).item(), lm_loss(model(tx), ty).item(), rtol=1e-5)

    def step(fwd, opt):
        def run():
            opt.zero_grad()
            loss = lm_loss(fwd(tx), ty)
            loss.backward()
            opt.step()
            return loss
        return run
    return step(model, opt), step(compiled, opt_c), compiled


def torch_steps(torch, args, x, y):
    """[(name, step)]: the same model in PyTorch, eager and (where inductor runs) torch.compile."""
    tnn, F = torch.nn, torch.nn.functional
    d, T = args.d_model, args.block_size

    class Block(tnn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = tnn.LayerNorm(d), tnn.LayerNorm(d)
            self.attn = tnn.MultiheadAttention(d, 4, batch_first=True)
            self.mlp = tnn.Sequential(tnn.Linear(d, 4 * d), tnn.GELU(approximate="tanh"), tnn.Linear(4 * d, d))

        def forward(self, x, mask):
            h = self.ln1(x)
            x = x + self.attn(h, h, h, need_weights=False, attn_mask=mask, is_causal=True)[0]
            return x + self.mlp(self.ln2(x))

    class GPT(tnn.Module):
        def __init__(self):
            super().__init__()
            self.tok_emb, self.pos_emb = tnn.Embedding(V, d), tnn.Embedding(T, d)
            self.blocks = tnn.ModuleList([Block() for _ in range(args.n_layer)])
            self.ln_f, self.head = tnn.LayerNorm(d), tnn.Linear(d, V)
            for name, p in self.named_parameters():
                if name.endswith("weight") and p.ndim == 2:
                    tnn.init.normal_(p, 0.0, 0.02)
            self.register_buffer("mask", tnn.Transformer.generate_square_subsequent_mask(T))

        def forward(self, idx):
            x = self.tok_emb(idx) + self.pos_emb(torch.arange(idx.shape[1]))
            for block in self.blocks:
                x = block(x, self.mask)
            return self.head(self.ln_f(x))

    tx, ty = torch.from_numpy(x), torch.from_numpy(y)

    def make(compile_it):
        torch.manual_seed(0)
        model = GPT()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        fwd = torch.compile(model) if compile_it else model

        def run():
            opt.zero_grad()
            loss = F.cross_entropy(fwd(tx).reshape(-1, V), ty.reshape(-1))
            loss.backward()
            opt.step()
            return loss
        return run
    steps = [("torch eager", make(False))]
    if not args.no_torch_compile:
        try:
            quiet_inductor(torch)
            run = make(True)
            t0 = time.perf_counter()
            run()
            print(f"(torch.compile's first training step, forward and backward compiled: "
                  f"{time.perf_counter() - t0:.1f} s)")
            steps.append(("torch.compile(model)", run))
        except Exception as e:   # no C++ compiler for inductor, ...
            print(f"(torch.compile does not run here: {type(e).__name__}: {str(e)[:160]})")
    return steps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=None, help="timed steps per variant (15; 3 with --quick)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--n-layer", type=int, default=2)
    ap.add_argument("--block-size", type=int, default=None, help="tokens per sequence (64; 32 with --quick)")
    ap.add_argument("--batch", type=int, default=None, help="sequences per step (16; 4 with --quick)")
    ap.add_argument("--no-torch-compile", action="store_true", help="PyTorch eager only (no inductor build)")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 3 repeats, batch 4, 32 tokens")
    args = ap.parse_args()
    for name, full, quick in [("repeat", 15, 3), ("batch", 16, 4), ("block_size", 64, 32)]:
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    rng = np.random.default_rng(0)
    x = rng.integers(0, V, (args.batch, args.block_size))
    y = rng.integers(0, V, (args.batch, args.block_size))
    eager, compiled_step, compiled = minigrad_steps(args, x, y)
    variants = [("minigrad eager", eager), ("mg.compile(model)", compiled_step)]
    torch = try_import_torch(args.threads)
    if torch is not None:
        variants += torch_steps(torch, args, x, y)
    times = interleaved_medians([f for _, f in variants], repeat=args.repeat)
    graph = compiled.graphs()[0]
    print(f"tiny GPT d={args.d_model}, {args.n_layer} layers, T={args.block_size}, batch {args.batch}, "
          f"{args.threads} threads: {len(graph)} ops in the compiled graph, {len(fused_kernels(graph))} fused "
          f"kernels; {compiled.stats}")
    print(table([(name, f"{t * 1e3:.1f}", f"{times[0] / t:.2f}") for (name, _), t in zip(variants, times)],
                ["training step", "ms/step", "speed-up vs minigrad eager"]))


if __name__ == "__main__":
    main()
