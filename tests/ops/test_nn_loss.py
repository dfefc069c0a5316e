"""cross_entropy, nll_loss, mse_loss, binary_cross_entropy_with_logits against per-sample NumPy references."""
import numpy as np
import pytest

import minigrad as mg
import minigrad.nn.functional as F
from minigrad.autograd import gradcheck

RNG = np.random.default_rng(4)


def t64(a, device=None, requires_grad=True):
    return mg.tensor(np.asarray(a, dtype=np.float64), requires_grad=requires_grad, device=device)


def logsoftmax(v):
    m = v.max()
    return v - (m + np.log(np.exp(v - m).sum()))


def ref_cross_entropy(x, y, w=None, ignore_index=-100, reduction="mean", eps=0.0, log_probs=False):
    """Sample by sample, PyTorch's definition (docs of CrossEntropyLoss / NLLLoss)."""
    C = x.shape[1]
    w = np.ones(C) if w is None else w
    rows = np.moveaxis(x, 1, -1).reshape(-1, C)
    losses, denom = [], 0.0
    for v, t in zip(rows, y.reshape(-1)):
        if t == ignore_index:
            losses.append(0.0)
            continue
        logp = v if log_probs else logsoftmax(v)
        losses.append((1 - eps) * -w[t] * logp[t] + eps / C * -(w * logp).sum())
        denom += w[t]
    losses = np.array(losses).reshape(y.shape)
    return {"none": losses, "sum": losses.sum(), "mean": losses.sum() / denom}[reduction]


def ref_cross_entropy_probs(x, p, w=None, reduction="mean", eps=0.0):
    C = x.shape[1]
    w = np.ones(C) if w is None else w
    rows, targets = np.moveaxis(x, 1, -1).reshape(-1, C), np.moveaxis(p, 1, -1).reshape(-1, C)
    losses = np.array([-(w * ((1 - eps) * t + eps / C) * logsoftmax(v)).sum() for v, t in zip(rows, targets)])
    losses = losses.reshape((x.shape[0],) + x.shape[2:])
    return {"none": losses, "sum": losses.sum(), "mean": losses.mean()}[reduction]


CE_CASES = [  # (logits shape, weight?, ignore some?, reduction, label_smoothing)
    ((5, 4), False, False, "mean", 0.0),
    ((5, 4), True, True, "mean", 0.0),
    ((5, 4), True, True, "mean", 0.2),
    ((5, 4), False, True, "sum", 0.1),
    ((5, 4), True, True, "none", 0.3),
    ((2, 3, 4), True, True, "mean", 0.1),     # (N, C, d1)
    ((2, 3, 2, 2), False, True, "none", 0.0),  # (N, C, d1, d2)
    ((2, 3, 2, 2), True, False, "sum", 0.25),
]


def _ce_inputs(shape, weighted, ignore):
    x = RNG.standard_normal(shape) * 2
    y = RNG.integers(0, shape[1], size=(shape[0],) + shape[2:])
    if ignore:
        y.reshape(-1)[::3] = 7  # used as ignore_index below
        assert (y == 7).any()
    w = RNG.random(shape[1]) + 0.5 if weighted else None
    return x, y, w


@pytest.mark.parametrize("case", CE_CASES)
def test_cross_entropy_forward_and_gradcheck(case, device):
    shape, weighted, ignore, reduction, eps = case
    x, y, w = _ce_inputs(shape, weighted, ignore)
    kw = dict(weight=None if w is None else t64(w, device, False), ignore_index=7 if ignore else -100,
              reduction=reduction, label_smoothing=eps)
    out = F.cross_entropy(t64(x, device), mg.tensor(y, device=device), **kw)
    ref = ref_cross_entropy(x, y, w, 7 if ignore else -100, reduction, eps)
    np.testing.assert_allclose(out.detach().numpy(), ref, rtol=1e-10, atol=1e-12)
    assert gradcheck(lambda a: F.cross_entropy(a, mg.tensor(y, device=device), **kw), (t64(x, device),))


@pytest.mark.parametrize("case", CE_CASES)
def test_nll_loss_forward_and_gradcheck(case, device):
    shape, weighted, ignore, reduction, _ = case
    x, y, w = _ce_inputs(shape, weighted, ignore)
    kw = dict(weight=None if w is None else t64(w, device, False), ignore_index=7 if ignore else -100,
              reduction=reduction)
    out = F.nll_loss(t64(x, device), mg.tensor(y, device=device), **kw)
    ref = ref_cross_entropy(x, y, w, 7 if ignore else -100, reduction, log_probs=True)
    np.testing.assert_allclose(out.detach().numpy(), ref, rtol=1e-10, atol=1e-12)
    assert gradcheck(lambda a: F.nll_loss(a, mg.tensor(y, device=device), **kw), (t64(x, device),))


def test_cross_entropy_equals_nll_of_log_softmax(device):
    x, y = RNG.standard_normal((6, 5)), RNG.integers(0, 5, 6)
    a = F.cross_entropy(t64(x, device), mg.tensor(y, device=device)).item()
    b = F.nll_loss(F.log_softmax(t64(x, device), dim=1), mg.tensor(y, device=device)).item()
    assert abs(a - b) < 1e-12


def test_cross_entropy_known_value(device):
    # log(e + e^2 + e^3) - 1; with smoothing 0.1: 0.9 * that + 0.1 / 3 * sum_c -logp_c
    x = mg.tensor([[1.0, 2.0, 3.0]], dtype=mg.float64, device=device)
    lse = np.log(np.exp(1) + np.exp(2) + np.exp(3))
    assert abs(F.cross_entropy(x, mg.tensor([0], device=device)).item() - (lse - 1)) < 1e-12
    smooth = 0.9 * (lse - 1) + 0.1 / 3 * (3 * lse - 6)
    assert abs(F.cross_entropy(x, mg.tensor([0], device=device), label_smoothing=0.1).item() - smooth) < 1e-12


def test_cross_entropy_all_ignored_is_nan_like_pytorch(device):
    out = F.cross_entropy(mg.randn(3, 4, device=device), mg.tensor([-100, -100, -100], device=device))
    assert np.isnan(out.item())
    out = F.cross_entropy(mg.randn(3, 4, device=device), mg.tensor([-100, -100, -100], device=device), reduction="sum")
    assert out.item() == 0.0


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("eps", [0.0, 0.2])
def test_cross_entropy_probability_targets(reduction, eps, device):
    x = RNG.standard_normal((4, 3, 2))
    p = RNG.random((4, 3, 2))
    p /= p.sum(axis=1, keepdims=True)
    w = RNG.random(3) + 0.5
    out = F.cross_entropy(t64(x, device), t64(p, device, False), weight=t64(w, device, False), reduction=reduction,
                          label_smoothing=eps)
    np.testing.assert_allclose(out.detach().numpy(), ref_cross_entropy_probs(x, p, w, reduction, eps), rtol=1e-10)
    assert gradcheck(lambda a, t: F.cross_entropy(a, t, weight=t64(w, device, False), reduction=reduction,
                                                  label_smoothing=eps), (t64(x, device), t64(p, device)))


def test_cross_entropy_unbatched(device):
    x = RNG.standard_normal(5)
    out = F.cross_entropy(t64(x, device), mg.tensor(2, device=device), reduction="none")
    assert out.shape == ()
    assert abs(out.item() + logsoftmax(x)[2]) < 1e-12
    assert gradcheck(lambda a: F.cross_entropy(a, mg.tensor(2, device=device), reduction="none"), (t64(x, device),))


def test_cross_entropy_stable_for_huge_logits(device):
    x = mg.tensor([[1e4, -1e4, 0.0], [-1e30, 1e30, 0.0]], requires_grad=True, device=device)
    loss = F.cross_entropy(x, mg.tensor([1, 0], device=device), label_smoothing=0.1)
    assert np.isfinite(loss.item())
    loss.backward()
    assert np.all(np.isfinite(x.grad.numpy()))
    np.testing.assert_allclose(F.cross_entropy(x, mg.tensor([0, 1], device=device), reduction="none").detach().numpy(),
                               [0, 0], atol=1e-6)


def test_losses_float32_preserved(device):
    x = mg.tensor(RNG.standard_normal((4, 3)).astype(np.float32), requires_grad=True, device=device)
    t = mg.tensor(RNG.random((4, 3)).astype(np.float32), requires_grad=True, device=device)
    w = mg.tensor(np.ones(3, np.float32), device=device)
    y = mg.tensor([0, 2, 1, 2], device=device)
    for fn in (lambda: F.cross_entropy(x, y, weight=w, label_smoothing=0.1),
               lambda: F.nll_loss(x, y), lambda: F.mse_loss(x, t),
               lambda: F.binary_cross_entropy_with_logits(x, t, pos_weight=w),
               lambda: F.cross_entropy(x, t)):
        x.grad = t.grad = None
        loss = fn()
        assert loss.dtype == mg.float32 and loss.shape == ()
        loss.backward()
        assert x.grad.dtype == mg.float32
        assert t.grad is None or t.grad.dtype == mg.float32


# --- mse ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss(reduction, device):
    a, b = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))
    d = (a - b) ** 2
    ref = {"mean": d.mean(), "sum": d.sum(), "none": d}[reduction]
    np.testing.assert_allclose(F.mse_loss(t64(a, device), t64(b, device), reduction).detach().numpy(), ref, rtol=1e-12)
    assert gradcheck(lambda x, y: F.mse_loss(x, y, reduction), (t64(a, device), t64(b, device)))


def test_mse_loss_broadcast_warns_like_pytorch(device):
    with pytest.warns(UserWarning, match="mse_loss: using a target size"):
        out = F.mse_loss(mg.zeros(3, 2, device=device), mg.ones(2, device=device))
    assert out.item() == 1.0


# --- binary cross-entropy with logits -------------------------------------------------------------
def ref_bce(x, t, w=None, pw=None, reduction="mean"):
    s = 1 / (1 + np.exp(-x))
    pw = 1.0 if pw is None else pw
    loss = -(pw * t * np.log(s) + (1 - t) * np.log(1 - s)) * (1.0 if w is None else w)
    return {"mean": loss.mean(), "sum": loss.sum(), "none": loss}[reduction]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("use_w,use_pw", [(False, False), (True, False), (False, True), (True, True)])
def test_bce_with_logits(reduction, use_w, use_pw, device):
    x, t = RNG.standard_normal((4, 3)) * 2, RNG.random((4, 3))
    w = RNG.random((4, 1)) + 0.5 if use_w else None      # broadcast weights, as PyTorch allows
    pw = RNG.random(3) + 0.5 if use_pw else None         # one per class (last dim)
    out = F.binary_cross_entropy_with_logits(t64(x, device), t64(t, device), None if w is None else t64(w, device),
                                             reduction, None if pw is None else t64(pw, device))
    np.testing.assert_allclose(out.detach().numpy(), ref_bce(x, t, w, pw, reduction), rtol=1e-10)
    args = ([t64(x, device), t64(t, device)] + ([t64(w, device)] if use_w else [])
            + ([t64(pw, device)] if use_pw else []))

    def fn(x, t, *rest):
        rest = list(rest)
        ww = rest.pop(0) if use_w else None
        pp = rest.pop(0) if use_pw else None
        return F.binary_cross_entropy_with_logits(x, t, ww, reduction, pp)

    assert gradcheck(fn, tuple(args))


def test_bce_with_logits_stable_for_huge_logits(device):
    x = mg.tensor([1e4, -1e4, 100.0, -100.0], requires_grad=True, device=device)
    t = mg.tensor([0.0, 1.0, 1.0, 0.0], device=device)
    loss = F.binary_cross_entropy_with_logits(x, t, reduction="none")
    np.testing.assert_allclose(loss.detach().numpy(), [1e4, 1e4, 0, 0], rtol=1e-6, atol=1e-30)
    loss.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1, -1, 0, 0], atol=1e-6)


@pytest.mark.parametrize("loss, target", [
    (lambda x, t: F.cross_entropy(x, t), np.array([0, 1, 2])),
    (lambda x, t: F.nll_loss(x, t), [0, 1, 2]),
    (lambda x, t: F.mse_loss(x, t), np.zeros((3, 4), np.float32)),
    (lambda x, t: F.binary_cross_entropy_with_logits(x, t), np.zeros((3, 4), np.float32)),
])
def test_losses_refuse_a_target_that_is_not_a_tensor_with_a_clear_error(loss, target):
    x = mg.randn(3, 4)
    with pytest.raises(TypeError, match=r"target must be a Tensor, got (ndarray|list) \(wrap it with mg.tensor"):
        loss(x, target)
