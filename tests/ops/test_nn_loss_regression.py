"""l1_loss, smooth_l1_loss, huber_loss and binary_cross_entropy: PyTorch's formulas, gradients, errors."""
import warnings

import numpy as np
import pytest

import minigrad as mg
import minigrad.nn.functional as F
from minigrad import nn
from minigrad.autograd import gradcheck
from minigrad.errors import ArgumentError, ShapeError


def _red(loss, reduction):
    return loss if reduction == "none" else loss.sum() if reduction == "sum" else loss.mean()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_regression_losses_match_their_formulas(reduction, device):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((4, 5)) * 2, rng.standard_normal((4, 5))
    d = a - b
    x, t = mg.tensor(a, device=device), mg.tensor(b, device=device)
    for beta in (1.0, 0.5, 0.0):
        ref = np.where(np.abs(d) < beta, 0.5 * d * d / (beta or 1), np.abs(d) - 0.5 * beta)
        np.testing.assert_allclose(F.smooth_l1_loss(x, t, reduction=reduction, beta=beta).numpy(),
                                   _red(ref, reduction), rtol=1e-12)
    delta = 1.5
    ref = np.where(np.abs(d) <= delta, 0.5 * d * d, delta * (np.abs(d) - 0.5 * delta))
    np.testing.assert_allclose(F.huber_loss(x, t, reduction=reduction, delta=delta).numpy(), _red(ref, reduction),
                               rtol=1e-12)
    np.testing.assert_allclose(F.l1_loss(x, t, reduction=reduction).numpy(), _red(np.abs(d), reduction),
                               rtol=1e-12)


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_gradcheck_regression_losses(reduction, device):
    x = mg.randn(3, 4, dtype=mg.float64, requires_grad=True, device=device)
    t = mg.randn(3, 4, dtype=mg.float64, requires_grad=True, device=device)
    assert gradcheck(lambda a, b: F.smooth_l1_loss(a, b, reduction=reduction, beta=0.7), (x, t))
    assert gradcheck(lambda a, b: F.huber_loss(a, b, reduction=reduction, delta=0.8), (x, t))
    assert gradcheck(lambda a, b: F.l1_loss(a, b, reduction=reduction), (x, t))


def test_binary_cross_entropy_formula_clamp_and_gradients(device):
    rng = np.random.default_rng(1)
    p, y, w = rng.uniform(0.05, 0.95, (3, 4)), rng.uniform(0, 1, (3, 4)), rng.uniform(0.5, 2, (3, 4))
    ref = -w * (y * np.log(p) + (1 - y) * np.log(1 - p))
    out = F.binary_cross_entropy(mg.tensor(p, device=device), mg.tensor(y, device=device),
                                 weight=mg.tensor(w, device=device), reduction="none")
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-12)
    assert gradcheck(lambda a, b, c: F.binary_cross_entropy(a, b, c),
                     tuple(mg.tensor(v, device=device, requires_grad=True) for v in (p, y, w)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        edge = F.binary_cross_entropy(mg.tensor([0.0, 1.0, 0.0], device=device),
                                      mg.tensor([1.0, 0.0, 0.0], device=device), reduction="none")
    np.testing.assert_array_equal(edge.numpy(), [100.0, 100.0, 0.0])          # logs clamped at -100
    sig = mg.sigmoid(mg.tensor([[0.3, -2.0]], device=device))
    np.testing.assert_allclose(F.binary_cross_entropy(sig, mg.tensor([[1.0, 0.0]], device=device)).numpy(),
                               F.binary_cross_entropy_with_logits(mg.tensor([[0.3, -2.0]], device=device),
                                                                  mg.tensor([[1.0, 0.0]], device=device)).numpy(),
                               rtol=1e-6)


def test_loss_modules_and_clear_errors():
    x, t = mg.randn(2, 3), mg.randn(2, 3)
    assert float(nn.SmoothL1Loss(beta=0.5)(x, t)) == pytest.approx(float(F.smooth_l1_loss(x, t, beta=0.5)))
    assert float(nn.HuberLoss(reduction="sum", delta=2.0)(x, t)) == \
        pytest.approx(float(F.huber_loss(x, t, reduction="sum", delta=2.0)))
    assert float(nn.L1Loss()(x, t)) == pytest.approx(float((x - t).abs().mean()))
    p = mg.sigmoid(x)
    assert float(nn.BCELoss(weight=mg.ones(3))(p, mg.ones(2, 3))) == pytest.approx(float(-mg.log(p).mean()), rel=1e-5)
    with pytest.raises(ArgumentError, match="between 0 and 1"):
        F.binary_cross_entropy(x * 10, mg.ones(2, 3))
    with pytest.raises(ShapeError, match="target size"):
        F.binary_cross_entropy(p, mg.ones(3))
    with pytest.raises(ArgumentError, match="beta must be a non-negative"):
        F.smooth_l1_loss(x, t, beta=-1.0)
    with pytest.warns(UserWarning, match="smooth_l1_loss: using a target size"):
        F.smooth_l1_loss(x, mg.randn(3))
