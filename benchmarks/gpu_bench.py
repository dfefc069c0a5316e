"""GPU training steps: minigrad on CuPy vs PyTorch CUDA (issue 4; run by `make gpu-check`).

    python3 benchmarks/gpu_bench.py [--repeat 20] [--quick]

Workloads: those of benchmarks/train_step.py (MLP 784-1024-1024-10 b=256 SGD; the CNN on 28x28 b=64 SGD;
pre-norm transformer block d=256 h=4 L=128 b=16) and the tiny GPT (minigrad.examples.tiny_gpt, d=128, 4
layers, 4 heads, L=128, b=16, AdamW; PyTorch: the same shapes from nn.TransformerEncoderLayer, pre-norm),
timed with a device synchronize after each step; medians after warm-up. Goal: minigrad reaches >= 0.5x
PyTorch's speed (autocast vs float32: benchmarks/amp_step.py). Each minigrad step's device-to-host traffic
is counted too (the reads through the backend's ``to_host``, one step after warm-up): a training step should
need none. Also runs on the NumPy-backed emulator (MINIGRAD_EMULATE_CUDA=1) as a smoke test of the code
path, where the numbers mean nothing.
"""
import argparse
import sys

import numpy as np
from common import median_time, table
from train_step import minigrad_block, minigrad_cnn, minigrad_mlp, torch_block, torch_cnn, torch_mlp

import minigrad as mg
from minigrad import optim
from minigrad.examples.tiny_gpt import TinyGPT, lm_loss

GPT = dict(vocab=65, block=128, d=128, layers=4, heads=4, batch=16)


def minigrad_gpt(device="cuda"):
    mg.manual_seed(0)
    model = TinyGPT(GPT["vocab"], GPT["block"], d_model=GPT["d"], n_layer=GPT["layers"], n_head=GPT["heads"])
    model.to(device)
    opt = optim.AdamW(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    x, y = (mg.tensor(rng.integers(0, GPT["vocab"], (GPT["batch"], GPT["block"])), device=device) for _ in "xy")

    def step():
        opt.zero_grad()
        lm_loss(model(x), y).backward()
        opt.step()
    return step


def torch_gpt(torch, device="cuda"):
    torch.manual_seed(0)
    tnn, V, T, d = torch.nn, GPT["vocab"], GPT["block"], GPT["d"]

    class Model(tnn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = tnn.Embedding(V, d), tnn.Embedding(T, d)
            self.blocks = tnn.ModuleList([tnn.TransformerEncoderLayer(d, GPT["heads"], 4 * d, dropout=0.0,
                                                                      activation="gelu", batch_first=True,
                                                                      norm_first=True)
                                          for _ in range(GPT["layers"])])
            self.ln, self.head = tnn.LayerNorm(d), tnn.Linear(d, V)
            self.register_buffer("mask", tnn.Transformer.generate_square_subsequent_mask(T))

        def forward(self, idx):
            h = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
            for block in self.blocks:
                h = block(h, src_mask=self.mask, is_causal=True)
            return self.head(self.ln(h))

    model = Model().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = (torch.randint(0, V, (GPT["batch"], T), device=device) for _ in "xy")

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x).reshape(-1, V), y.reshape(-1)).backward()
        opt.step()
    return step


class HostReads:
    """Counts device-to-host reads through the cuda backend's ``to_host`` while active (a measuring
    instrument of this script: it wraps that one method on the backend object and puts it back)."""

    def __init__(self, device="cuda"):
        self.backend, self.reads, self.bytes = mg.backend.get_backend(mg.device(device)), 0, 0

    def __enter__(self):
        original = self.backend.to_host

        def to_host(array):
            self.reads, self.bytes = self.reads + 1, self.bytes + array.nbytes
            return original(array)
        self.backend.to_host = to_host
        return self

    def __exit__(self, *exc):
        del self.backend.to_host


def synced(step, sync):
    def run():
        step()
        sync()
    return run


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--quick", action="store_true", help="tiny repeat count (smoke test)")
    args = p.parse_args(argv)
    repeat = 2 if args.quick else args.repeat
    if not mg.cuda.is_available():
        sys.exit("gpu_bench: no CUDA device (set MINIGRAD_EMULATE_CUDA=1 for a smoke run)")
    sync_mg = lambda: mg.cuda.synchronize()  # noqa: E731
    try:
        import torch
        has_torch = torch.cuda.is_available()
    except ImportError:
        has_torch = False
    rows = []
    mlp_b, cnn_b, block_b = (8, 4, 1) if args.quick else (256, 64, 16)   # --quick: a smoke run, tiny batches
    if args.quick:
        GPT.update(block=16, batch=2, layers=1)
    cases = [("MLP step (784-1024-1024-10, b=256)", lambda: minigrad_mlp(mlp_b, device="cuda")[0],
              lambda: torch_mlp(torch, mlp_b, device="cuda")),
             ("CNN step (2 conv + linear, 28x28, b=64)", lambda: minigrad_cnn(cnn_b, device="cuda"),
              lambda: torch_cnn(torch, cnn_b, device="cuda")),
             ("Transformer block (d=256, h=4, L=128, b=16)", lambda: minigrad_block(block_b, device="cuda"),
              lambda: torch_block(torch, block_b, device="cuda")),
             ("tiny GPT step (d=128, 4 layers, L=128, b=16)", lambda: minigrad_gpt(), lambda: torch_gpt(torch))]
    for name, make_mg, make_pt in cases:
        step = make_mg()
        t_mg = median_time(synced(step, sync_mg), repeat, warmup=3)
        with HostReads() as reads:
            step()
        rows.append([name, "minigrad (CuPy)", f"{t_mg * 1e3:.3f}"])
        rows.append(["", "minigrad device-to-host reads / step", f"{reads.reads} ({reads.bytes} B)"])
        if has_torch:
            t_pt = median_time(synced(make_pt(), torch.cuda.synchronize), repeat, warmup=3)
            rows.append(["", f"PyTorch {torch.__version__} CUDA", f"{t_pt * 1e3:.3f}"])
            rows.append(["", "speed vs PyTorch (goal >= 0.5)", f"{t_pt / t_mg:.2f}x"])
    kind = "emulated (NumPy) - numbers meaningless" if mg.cuda.is_emulated() else "real GPU"
    print(f"GPU training steps on {kind}, median of {repeat}")
    print(table(rows, ["workload", "implementation", "ms / step"]))


if __name__ == "__main__":
    main()
