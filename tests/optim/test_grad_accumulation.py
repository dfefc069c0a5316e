"""Gradient accumulation: k micro-batches of size b with loss / k give the same update as one batch of k*b."""
import copy

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn, optim


def _mlp(device):
    mg.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 16), nn.GELU(), nn.Linear(16, 3))
    return model.double().to(device)


@pytest.mark.parametrize("make_opt", [
    lambda p: optim.SGD(p, lr=0.1, momentum=0.9),
    lambda p: optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3),
    lambda p: optim.AdamW(p, lr=1e-2, weight_decay=0.1),
], ids=["sgd_momentum", "sgd_nesterov_wd", "adamw"])
@pytest.mark.parametrize("loss_name", ["cross_entropy", "mse"])
def test_micro_batches_match_full_batch(make_opt, loss_name, device):
    k, b, steps = 4, 8, 3
    rng = np.random.default_rng(1)
    full = _mlp(device)
    acc = copy.deepcopy(full)
    opt_full, opt_acc = make_opt(full.parameters()), make_opt(acc.parameters())

    def loss_fn(out, y):
        if loss_name == "cross_entropy":
            return nn.functional.cross_entropy(out, y)
        return nn.functional.mse_loss(out, y)

    for _ in range(steps):
        x = rng.standard_normal((k * b, 6))
        y = rng.integers(0, 3, k * b) if loss_name == "cross_entropy" else rng.standard_normal((k * b, 3))
        opt_full.zero_grad()
        loss_fn(full(mg.tensor(x, device=device)), mg.tensor(y, device=device)).backward()
        opt_full.step()

        opt_acc.zero_grad()
        for i in range(k):
            sl = slice(i * b, (i + 1) * b)
            (loss_fn(acc(mg.tensor(x[sl], device=device)), mg.tensor(y[sl], device=device)) / k).backward()
        opt_acc.step()

    for (name, p), q in zip(full.named_parameters(), acc.parameters()):
        np.testing.assert_allclose(q.detach().numpy(), p.detach().numpy(), rtol=0, atol=1e-6, err_msg=name)
        # far tighter than the 1e-6 asked for: only summation order differs
        np.testing.assert_allclose(q.detach().numpy(), p.detach().numpy(), rtol=1e-10, atol=1e-12, err_msg=name)


def test_accumulated_gradient_equals_full_batch_gradient(device):
    model = _mlp(device)
    x = mg.randn(12, 6, dtype=mg.float64, device=device)
    y = mg.randint(0, 3, (12,), device=device)
    nn.functional.cross_entropy(model(x), y).backward()
    full = [p.grad.numpy().copy() for p in model.parameters()]
    model.zero_grad()
    for i in range(3):
        (nn.functional.cross_entropy(model(x[i * 4:(i + 1) * 4]), y[i * 4:(i + 1) * 4]) / 3).backward()
    for g, p in zip(full, model.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), g, rtol=1e-10, atol=1e-14)
