"""Training-step benchmarks: minigrad vs PyTorch CPU (same workload, same thread count, one run, medians).

    make bench                                   (creates .venv-bench with torch==2.13.0)
    .venv-bench/bin/python benchmarks/train_step.py [--threads 2] [--repeat 15] [--only mlp,cnn,block,memory,pool]

Workloads (issue 3):
- MLP 784-1024-1024-10, batch 256, SGD step; also a hand-written NumPy forward/backward/update of the same
  MLP (the floor a NumPy framework can reach) and achieved GFLOP/s against NumPy's own sgemm rate;
- CNN conv(1→32, 3×3) → ReLU → maxpool → conv(32→64, 3×3) → ReLU → maxpool → linear, batch 64, 28×28;
- one pre-norm transformer block, d=256, 4 heads, seq 128, batch 16;
- peak memory of the MLP step against the live-bytes lower bound;
- (issue 4) the MLP step with minigrad's caching pool on vs plain NumPy allocation.
"""
import argparse
import sys

from common import interleaved_medians, median_time, pin_threads, table

_THREADS = 2
for i, a in enumerate(sys.argv):
    if a == "--threads" and i + 1 < len(sys.argv):
        _THREADS = int(sys.argv[i + 1])
pin_threads(_THREADS)

import numpy as np  # noqa: E402

import minigrad as mg  # noqa: E402
import minigrad.nn as nn  # noqa: E402
import minigrad.nn.functional as F  # noqa: E402

MLP_SIZES = (784, 1024, 1024, 10)


def _torch(threads):
    try:
        import torch
    except ImportError:
        print("(PyTorch not importable: run `make bench` for the side-by-side numbers)", file=sys.stderr)
        return None
    torch.set_num_threads(threads)
    return torch


# --- MLP --------------------------------------------------------------------------------------------
def mlp_flops(batch):
    fwd = sum(2 * batch * a * b for a, b in zip(MLP_SIZES[:-1], MLP_SIZES[1:]))
    dw = fwd                                       # one GEMM per weight gradient
    dx = sum(2 * batch * a * b for a, b in zip(MLP_SIZES[1:-1], MLP_SIZES[2:]))  # no dx for the input
    return fwd + dw + dx


def minigrad_mlp(batch, lr=0.01, device="cpu"):
    mg.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                          nn.Linear(1024, 10)).to(device)
    opt = mg.optim.SGD(model.parameters(), lr=lr)
    x = mg.randn(batch, 784, device=device)
    y = mg.randint(0, 10, (batch,), device=device)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    return step, model, x


def torch_mlp(torch, batch, lr=0.01, device="cpu"):
    torch.manual_seed(0)
    tnn = torch.nn
    model = tnn.Sequential(tnn.Linear(784, 1024), tnn.ReLU(), tnn.Linear(1024, 1024), tnn.ReLU(),
                           tnn.Linear(1024, 10)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    x = torch.randn(batch, 784, device=device)
    y = torch.randint(0, 10, (batch,), device=device)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    return step


def numpy_mlp(batch, lr=0.01):
    """Hand-written NumPy MLP step, written for speed: BLAS-friendly layouts, in-place ops, no copies."""
    rng = np.random.default_rng(0)
    Ws = [(rng.standard_normal((o, i)) / np.sqrt(i)).astype(np.float32)
          for i, o in zip(MLP_SIZES[:-1], MLP_SIZES[1:])]
    bs = [np.zeros(o, np.float32) for o in MLP_SIZES[1:]]
    x = rng.standard_normal((batch, 784)).astype(np.float32)
    y = rng.integers(0, 10, batch)
    rows = np.arange(batch)

    def step():
        acts = [x]
        h = x
        for k, (W, b) in enumerate(zip(Ws, bs)):
            h = h @ W.T
            h += b
            if k < len(Ws) - 1:
                np.maximum(h, 0, out=h)
            acts.append(h)
        logits = acts[-1]
        logits -= logits.max(axis=1, keepdims=True)
        np.exp(logits, out=logits)
        logits /= logits.sum(axis=1, keepdims=True)          # softmax probabilities
        logits[rows, y] -= 1.0
        g = logits
        g *= 1.0 / batch                                     # d mean-CE / d logits
        for k in range(len(Ws) - 1, -1, -1):
            W = Ws[k]
            gW = g.T @ acts[k]
            gb = g.sum(axis=0)
            if k:
                g_prev = g @ W
                g_prev *= acts[k] > 0                        # through the ReLU
            W -= lr * gW
            bs[k] -= lr * gb
            if k:
                g = g_prev
    return step


def sgemm_gflops(n=1024, repeat=7):
    a = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32)
    t = median_time(lambda: a @ a, repeat)
    return 2 * n ** 3 / t / 1e9


def bench_mlp(torch, args, rows):
    batch = 256
    step, _, _ = minigrad_mlp(batch)
    t_mg, t_np, *t_pt = interleaved_medians([step, numpy_mlp(batch), torch and torch_mlp(torch, batch)],
                                            args.repeat)
    flops = mlp_flops(batch)
    peak = sgemm_gflops()
    rows.append(["MLP step (784-1024-1024-10, b=256)", "minigrad", f"{t_mg * 1e3:.2f}",
                 f"{flops / t_mg / 1e9:.1f}"])
    rows.append(["", "hand-written NumPy", f"{t_np * 1e3:.2f}", f"{flops / t_np / 1e9:.1f}"])
    if torch:
        t_pt, = t_pt
        rows.append(["", "PyTorch", f"{t_pt * 1e3:.2f}", f"{flops / t_pt / 1e9:.1f}"])
        rows.append(["", "minigrad / PyTorch", f"{t_mg / t_pt:.2f}x", ""])
    rows.append(["", "minigrad / NumPy floor", f"{t_mg / t_np:.2f}x", ""])
    rows.append(["", "NumPy sgemm 1024³", "", f"{peak:.1f}"])


# --- CNN --------------------------------------------------------------------------------------------
def minigrad_cnn(batch, device="cpu"):
    mg.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64 * 5 * 5, 10)).to(device)
    opt = mg.optim.SGD(model.parameters(), lr=0.01)
    x = mg.randn(batch, 1, 28, 28, device=device)
    y = mg.randint(0, 10, (batch,), device=device)

    def step():
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    return step


def torch_cnn(torch, batch, device="cpu"):
    torch.manual_seed(0)
    tnn = torch.nn
    model = tnn.Sequential(tnn.Conv2d(1, 32, 3), tnn.ReLU(), tnn.MaxPool2d(2), tnn.Conv2d(32, 64, 3), tnn.ReLU(),
                           tnn.MaxPool2d(2), tnn.Flatten(), tnn.Linear(64 * 5 * 5, 10)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(batch, 1, 28, 28, device=device)
    y = torch.randint(0, 10, (batch,), device=device)

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return step


def numpy_cnn(batch, lr=0.01):
    """Hand-written NumPy CNN step, the floor a NumPy framework can reach: channels-last throughout, one
    gather per im2col, bias folded into the GEMMs as a column of ones, ReLU in place, 2x2 pooling as four
    strided views, and no tie handling in pooling (a tie is almost always a ReLU zero, whose gradient the
    ReLU kills anyway; minigrad must send it to the first maximum, as PyTorch does)."""
    rng = np.random.default_rng(0)
    f32 = np.float32
    W1 = (rng.standard_normal((32, 10)) / 3).astype(f32)          # (O, 9 taps + bias)
    W2 = (rng.standard_normal((64, 289)) / 17).astype(f32)        # (O, 3*3*32 (offset, channel) + bias)
    W3 = (rng.standard_normal((10, 1601)) / 40).astype(f32)       # (10, 5*5*64 + bias)
    x = rng.standard_normal((batch, 28, 28)).astype(f32)
    y = rng.integers(0, 10, batch)
    rows = np.arange(batch)
    n1, n2 = batch * 26 * 26, batch * 11 * 11
    cols1 = np.ones((10, n1), f32)
    cols2 = np.ones((n2, 289), f32)
    feats = np.ones((batch, 1601), f32)
    s = x.strides
    cols1[:9].reshape(3, 3, batch, 26, 26)[...] = np.lib.stride_tricks.as_strided(
        x, (3, 3, batch, 26, 26), (s[1], s[2]) + s)                # the input never changes: gather once

    def pool_fwd(a, out):                       # a (N, 2h, 2w, C) -> out (N, h, w, C)
        np.maximum(a[:, 0::2, 0::2], a[:, 0::2, 1::2], out=out)
        np.maximum(out, a[:, 1::2, 0::2], out=out)
        np.maximum(out, a[:, 1::2, 1::2], out=out)

    def pool_bwd(a, out, g, da):                # gradient to every position equal to its window's max
        for i in (0, 1):
            for j in (0, 1):
                np.multiply(g, a[:, i::2, j::2] == out, out=da[:, i::2, j::2])

    def step():
        a1 = (cols1.T @ W1.T).reshape(batch, 26, 26, 32)
        np.maximum(a1, 0, out=a1)
        p1 = np.empty((batch, 13, 13, 32), f32)
        pool_fwd(a1, p1)
        w = np.lib.stride_tricks.as_strided(p1, (batch, 11, 11, 3, 3, 32), p1.strides[:3] + p1.strides[1:])
        cols2[:, :288].reshape(batch, 11, 11, 3, 3, 32)[...] = w
        a2 = (cols2 @ W2.T).reshape(batch, 11, 11, 64)
        np.maximum(a2, 0, out=a2)
        p2 = np.empty((batch, 5, 5, 64), f32)
        pool_fwd(a2[:, :10, :10], p2)
        feats[:, :1600] = p2.reshape(batch, -1)
        logits = feats @ W3.T
        logits -= logits.max(axis=1, keepdims=True)
        np.exp(logits, out=logits)
        logits /= logits.sum(axis=1, keepdims=True)
        logits[rows, y] -= 1.0
        g = logits
        g *= 1.0 / batch
        gW3 = g.T @ feats
        dp2 = (g @ W3[:, :1600]).reshape(batch, 5, 5, 64)
        da2 = np.zeros_like(a2)
        pool_bwd(a2[:, :10, :10], p2, dp2, da2[:, :10, :10])
        da2 *= a2 > 0
        g2 = da2.reshape(n2, 64)
        gW2 = g2.T @ cols2
        wk = np.ascontiguousarray(W2[:, :288].reshape(64, 9, 32).transpose(1, 0, 2))   # (offset, O, C)
        dcols = g2[None] @ wk                                                          # (9, n2, 32)
        dp1 = np.zeros((batch, 13, 13, 32), f32)
        for k in range(9):
            dp1[:, k // 3:k // 3 + 11, k % 3:k % 3 + 11] += dcols[k].reshape(batch, 11, 11, 32)
        da1 = np.empty_like(a1)
        pool_bwd(a1, p1, dp1, da1)
        da1 *= a1 > 0
        gW1 = da1.reshape(n1, 32).T @ cols1.T
        W1[...] -= lr * gW1
        W2[...] -= lr * gW2
        W3[...] -= lr * gW3
    step.params, step.x, step.y = (W1, W2, W3), x, y     # for the equivalence check in tests/benchmarks
    return step


def bench_cnn(torch, args, rows):
    t_mg, t_np, *t_pt = interleaved_medians([minigrad_cnn(64), numpy_cnn(64), torch and torch_cnn(torch, 64)],
                                            args.repeat)
    rows.append(["CNN step (2 conv + pool + linear, b=64)", "minigrad", f"{t_mg * 1e3:.2f}", ""])
    rows.append(["", "hand-written NumPy", f"{t_np * 1e3:.2f}", ""])
    if torch:
        t_pt, = t_pt
        rows.append(["", "PyTorch", f"{t_pt * 1e3:.2f}", ""])
        rows.append(["", "minigrad / PyTorch", f"{t_mg / t_pt:.2f}x", ""])
        rows.append(["", "NumPy floor / PyTorch", f"{t_np / t_pt:.2f}x", ""])
    rows.append(["", "minigrad / NumPy floor", f"{t_mg / t_np:.2f}x", ""])


# --- transformer block ------------------------------------------------------------------------------
def minigrad_block(batch=16, seq=128, d=256, heads=4, device="cpu"):
    mg.manual_seed(0)
    block = nn.TransformerBlock(d, heads).to(device)
    opt = mg.optim.SGD(block.parameters(), lr=0.01)
    x = mg.randn(batch, seq, d, device=device)
    r = mg.randn(batch, seq, d, device=device)

    def step():
        opt.zero_grad()
        (block(x, is_causal=True) * r).mean().backward()
        opt.step()
    return step


def torch_block(torch, batch=16, seq=128, d=256, heads=4, device="cpu"):
    torch.manual_seed(0)
    tnn = torch.nn

    class Block(tnn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = tnn.LayerNorm(d), tnn.LayerNorm(d)
            self.attn = tnn.MultiheadAttention(d, heads, batch_first=True)
            self.mlp = tnn.Sequential(tnn.Linear(d, 4 * d), tnn.GELU(), tnn.Linear(4 * d, d))

        def forward(self, x, mask):
            h = self.ln1(x)
            x = x + self.attn(h, h, h, need_weights=False, attn_mask=mask, is_causal=True)[0]
            return x + self.mlp(self.ln2(x))

    block = Block().to(device)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(seq, device=device)
    opt = torch.optim.SGD(block.parameters(), lr=0.01)
    x = torch.randn(batch, seq, d, device=device)
    r = torch.randn(batch, seq, d, device=device)

    def step():
        opt.zero_grad()
        (block(x, mask) * r).mean().backward()
        opt.step()
    return step


def bench_block(torch, args, rows):
    t_mg, *t_pt = interleaved_medians([minigrad_block(), torch and torch_block(torch)], args.repeat)
    rows.append(["Transformer block (d=256, h=4, L=128, b=16)", "minigrad", f"{t_mg * 1e3:.2f}", ""])
    if torch:
        t_pt, = t_pt
        rows.append(["", "PyTorch", f"{t_pt * 1e3:.2f}", ""])
        rows.append(["", "minigrad / PyTorch", f"{t_mg / t_pt:.2f}x", ""])


# --- memory and pool ----------------------------------------------------------------------------------
def mlp_lower_bound(batch):
    """Bytes that must be live at the peak of an SGD step: params + grads + optimizer state (none for plain
    SGD) + what backward needs: the input, the two ReLU outputs (also the next Linear's input) and the
    log-probabilities of the loss."""
    params = sum(a * b + b for a, b in zip(MLP_SIZES[:-1], MLP_SIZES[1:])) * 4
    acts = (batch * 784 + 2 * batch * 1024 + batch * 10) * 4
    return params, params, 0, acts


def bench_memory(args, rows):
    batch = 256
    mem = mg.memory
    with mem.enabled("cpu"):
        step, model, x = minigrad_mlp(batch)
        step()                       # grads now exist: measure a steady-state step
        mem.reset_peak_memory_stats()
        base = mem.memory_allocated()
        step()
        peak = mem.max_memory_allocated()
        reserved = mem.max_memory_reserved()
    p, g, s, a = mlp_lower_bound(batch)
    mib = 2 ** 20
    rows.append(["MLP step peak memory", "minigrad peak allocated", f"{peak / mib:.2f} MiB", ""])
    rows.append(["", "  reserved by the pool", f"{reserved / mib:.2f} MiB", ""])
    rows.append(["", "  live between steps", f"{base / mib:.2f} MiB", ""])
    rows.append(["", "lower bound (p+g+state+acts)", f"{(p + g + s + a) / mib:.2f} MiB",
                 f"p {p / mib:.2f} + g {g / mib:.2f} + s {s / mib:.2f} + a {a / mib:.2f}"])
    rows.append(["", "peak / lower bound", f"{peak / (p + g + s + a):.2f}x", ""])


def bench_pool(args, rows):
    batch = 256
    step, _, _ = minigrad_mlp(batch)
    with mg.memory.enabled("cpu"):
        step_p, _, _ = minigrad_mlp(batch)

    def pooled():   # the pool on for this step only; its cache stays warm between steps
        mg.memory.enable("cpu")
        try:
            step_p()
        finally:
            mg.memory.disable("cpu", empty_cache=False)
    t_plain, t_pool = interleaved_medians([step, pooled], args.repeat)
    rows.append(["MLP step, caching pool (issue 4)", "plain NumPy allocation", f"{t_plain * 1e3:.2f}", ""])
    rows.append(["", "minigrad pool", f"{t_pool * 1e3:.2f}", ""])
    rows.append(["", "pool / plain", f"{t_pool / t_plain:.3f}x", ""])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--only", default="mlp,cnn,block,memory,pool")
    args = p.parse_args(argv)
    torch = _torch(args.threads)
    rows = []
    which = args.only.split(",")
    for name, fn in (("mlp", lambda: bench_mlp(torch, args, rows)), ("cnn", lambda: bench_cnn(torch, args, rows)),
                     ("block", lambda: bench_block(torch, args, rows)), ("memory", lambda: bench_memory(args, rows)),
                     ("pool", lambda: bench_pool(args, rows))):
        if name in which:
            fn()
    print(f"training steps, {args.threads} threads, median of {args.repeat} runs in alternating blocks of 5, after warm-up "
          f"(numpy {np.__version__}" + (f", torch {torch.__version__}" if torch else "") + ")")
    print(table(rows, ["workload", "implementation", "ms / value", "GFLOP/s / detail"]))


if __name__ == "__main__":
    main()
