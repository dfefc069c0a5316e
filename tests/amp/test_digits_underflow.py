"""End to end on the digits: a float16 model (float32 master weights, Adam) whose loss carries a small
weight (1e-5, as a loss normalised by a large token count would) loses its gradients to float16 underflow
without loss scaling and stalls; with GradScaler it converges. The same run in float32 converges too, so
it is float16's range that fails, not the weighting (Adam does not care about a constant factor)."""
import numpy as np

import minigrad as mg
import minigrad.nn.functional as F
from minigrad import nn, optim
from minigrad.datasets import load_digits_arrays

LOSS_WEIGHT = 1e-5


def train(dtype, scale, steps=150):
    X, Y = load_digits_arrays("train", flatten=True)
    Xt, Yt = load_digits_arrays("test", flatten=True)
    mg.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10)).to(dtype)
    mw = mg.amp.master_weights(model)
    opt = optim.Adam(mw.parameters(), lr=1e-2)
    scaler = mg.amp.GradScaler(enabled=scale)
    rng = np.random.default_rng(0)
    zero = []
    for _ in range(steps):
        idx = rng.integers(0, len(X), 64)
        loss = F.cross_entropy(model(mg.tensor(X[idx]).to(dtype)).float(), mg.tensor(Y[idx])) * LOSS_WEIGHT
        scaler.scale(loss).backward()
        g = np.concatenate([p.grad.numpy().ravel() for p in model.parameters()])
        zero.append(float((g == 0).mean()))
        mw.step(opt, scaler)
        scaler.update()
    with mg.no_grad():
        acc = float((model(mg.tensor(Xt).to(dtype)).argmax(-1).numpy() == Yt).mean())
    return acc, float(np.mean(zero))


def test_float16_without_scaling_underflows_and_stalls_with_scaling_it_converges():
    acc_plain, zero_plain = train(mg.float16, scale=False)
    acc_scaled, zero_scaled = train(mg.float16, scale=True)
    acc_fp32, zero_fp32 = train(mg.float32, scale=False)
    print(f"\nfloat16 unscaled: accuracy {acc_plain:.3f}, zero gradient fraction {zero_plain:.3f}"
          f"\nfloat16 scaled:   accuracy {acc_scaled:.3f}, zero gradient fraction {zero_scaled:.3f}"
          f"\nfloat32:          accuracy {acc_fp32:.3f}, zero gradient fraction {zero_fp32:.3f}")
    # a quarter of the gradient is exactly 0 anyway (always-blank pixels); underflow adds to it
    assert zero_plain > zero_fp32 + 0.1 and abs(zero_scaled - zero_fp32) < 0.02
    assert acc_plain < 0.6 and acc_scaled > 0.9 and acc_fp32 > 0.9
