"""GPU check of piecewise replay (issue 15, run by `make gpu-check`): functions with graph breaks on a real
CUDA device equal eager on the same device: a transformer block with an ``.item()`` in the middle (loss and
parameter gradients), the branch the trace did not see (a deopt), dropout with the same seed, and a value
read in the middle of a piece (CuPy arrays behind the stand-ins).

    python3 benchmarks/gpu_piecewise_check.py [--device cuda]

Also runs on the NumPy-backed emulator (MINIGRAD_EMULATE_CUDA=1) or on cpu as a smoke test.
Exits non-zero when a check fails.
"""
import argparse
import sys

import numpy as np

import minigrad as mg
import minigrad.nn.functional as F
from minigrad import nn


class Block(nn.Module):
    def __init__(self, d=32, dropout=0.0):
        super().__init__()
        self.b1 = nn.TransformerBlock(d, 4, causal=True, activation="gelu_tanh", dropout=dropout)
        self.b2 = nn.TransformerBlock(d, 4, activation="gelu", dropout=dropout)

    def forward(self, x):
        h = self.b1(x)
        scale = h.pow(2.0).mean().item()          # graph break
        return self.b2(h * (1.0 / (1.0 + scale)))


def step(model, params, x, seed):
    for p in params:
        p.grad = None
    mg.manual_seed(seed)
    loss = (model(x) * x).sin().sum()
    loss.backward()
    return loss.item(), [p.grad.cpu().numpy().copy() for p in params]


def compare(name, model, x, compiled, calls=3):
    params = list(model.parameters())
    ok = True
    for k in range(calls):
        got = step(compiled, params, x, k)
        want = step(model, params, x, k)
        err = max([abs(got[0] - want[0]) / max(1.0, abs(want[0]))] +
                  [float(np.abs(a - b).max() / max(1e-6, np.abs(b).max())) for a, b in zip(got[1], want[1])])
        ok &= err < 1e-4
    print(f"{name:42s} max rel. err {err:.2e}  stats {compiled.stats}  {'OK' if ok else 'FAIL'}")
    return ok and compiled.stats["piecewise"] >= calls - 1


def sign_branch(x):
    y = x * 3.0
    z = (y * y).tanh() if y.sum() > 0 else y.exp() - 1.0
    return z.mean() + z.sum().item() * y


def read_mid_piece(x):
    h = (x * 2.0).tanh()
    peek = float(h.array.max())                  # program code reads a fused-away value: computed on the spot
    return (h * 3.0 + peek).sum() * x.mean().item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    dev = args.device
    if dev == "cuda" and not mg.cuda.is_available():
        sys.exit("no CUDA device")
    ok = True
    mg.manual_seed(0)
    for dropout in (0.0, 0.1):
        model = Block(dropout=dropout).to(dev)
        x = mg.randn(4, 16, 32, device=dev)
        ok &= compare(f"transformer + .item(), dropout {dropout}", model, x, mg.compile(model))
    for fn, xs in ((sign_branch, (1, -1, 1)), (read_mid_piece, (1, 1, 1))):
        c = mg.compile(fn)
        err = 0.0
        for sign in xs:
            x = mg.tensor(sign * np.linspace(0.1, 1, 4096, dtype=np.float32), device=dev)
            a, b = c(x).cpu().numpy(), fn(x).cpu().numpy()
            err = max(err, float(np.abs(a - b).max() / np.abs(b).max()))
        good = err < 1e-5 and c.stats["piecewise"] == len(xs) - 1
        print(f"{fn.__name__:42s} max rel. err {err:.2e}  stats {c.stats}  {'OK' if good else 'FAIL'}")
        ok &= good
    print("piecewise replay on", dev, "OK" if ok else "FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
