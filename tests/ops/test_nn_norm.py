"""layer_norm and batch_norm: NumPy references, running statistics (PyTorch's update rule), gradchecks."""
import numpy as np
import pytest

import minigrad as mg
import minigrad.nn.functional as F
from minigrad.autograd import gradcheck
from minigrad.errors import ArgumentError, ShapeError

RNG = np.random.default_rng(3)


def t64(a, device=None, requires_grad=True):
    return mg.tensor(np.asarray(a, dtype=np.float64), requires_grad=requires_grad, device=device)


def ref_layer_norm(x, k, w=None, b=None, eps=1e-5):
    axes = tuple(range(x.ndim - k, x.ndim))
    mu = x.mean(axis=axes, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps)
    return y * (1 if w is None else w) + (0 if b is None else b)


def ref_batch_norm_train(x, w, b, eps=1e-5):
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    mu = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w.reshape(shape) + b.reshape(shape)


@pytest.mark.parametrize("shape,ns", [((4, 5), (5,)), ((2, 3, 4), (4,)), ((2, 3, 4), (3, 4))])
def test_layer_norm_forward_and_gradcheck(shape, ns, device):
    x = RNG.standard_normal(shape) * 3 + 1
    w, b = RNG.standard_normal(ns), RNG.standard_normal(ns)
    out = F.layer_norm(t64(x, device), ns, t64(w, device), t64(b, device))
    np.testing.assert_allclose(out.detach().numpy(), ref_layer_norm(x, len(ns), w, b), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(F.layer_norm(t64(x, device), ns).detach().numpy(), ref_layer_norm(x, len(ns)),
                               rtol=1e-10, atol=1e-12)
    assert gradcheck(lambda x, w, b: F.layer_norm(x, ns, w, b), (t64(x, device), t64(w, device), t64(b, device)))
    assert gradcheck(lambda x: F.layer_norm(x, ns), (t64(x, device),))


def test_layer_norm_int_shape_and_float32(device):
    x = mg.tensor(RNG.standard_normal((3, 6)).astype(np.float32), requires_grad=True, device=device)
    w = mg.ones(6, requires_grad=True, device=device)
    b = mg.zeros(6, requires_grad=True, device=device)
    y = F.layer_norm(x, 6, w, b)
    y.backward(mg.randn(3, 6, device=device))
    assert y.dtype == x.grad.dtype == w.grad.dtype == b.grad.dtype == mg.float32
    np.testing.assert_allclose(y.detach().numpy().mean(axis=1), 0, atol=1e-6)
    np.testing.assert_allclose(y.detach().numpy().var(axis=1), 1, rtol=1e-3)


def test_layer_norm_normalized_shape_mismatch():
    with pytest.raises(ShapeError, match=r"layer_norm: normalized_shape \(5,\) does not match .*\(2, 4\)"):
        F.layer_norm(mg.randn(2, 4), (5,))
    with pytest.raises(ShapeError, match=r"layer_norm: weight shape \(3,\)"):
        F.layer_norm(mg.randn(2, 4), 4, mg.ones(3))


@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5), (2, 3, 3, 4)])
def test_batch_norm_training_forward_running_stats_and_gradcheck(shape, device):
    x = RNG.standard_normal(shape) * 2 + 0.5
    C = shape[1]
    w, b = RNG.standard_normal(C), RNG.standard_normal(C)
    rm, rv = mg.zeros(C, dtype=mg.float64, device=device), mg.ones(C, dtype=mg.float64, device=device)
    out = F.batch_norm(t64(x, device), rm, rv, t64(w, device), t64(b, device), training=True, momentum=0.1)
    np.testing.assert_allclose(out.detach().numpy(), ref_batch_norm_train(x, w, b), rtol=1e-10, atol=1e-12)
    axes = (0,) + tuple(range(2, x.ndim))
    np.testing.assert_allclose(rm.numpy(), 0.1 * x.mean(axis=axes), rtol=1e-12)
    np.testing.assert_allclose(rv.numpy(), 0.9 + 0.1 * x.var(axis=axes, ddof=1), rtol=1e-12)  # unbiased
    assert gradcheck(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                     (t64(x, device), t64(w, device), t64(b, device)))
    assert gradcheck(lambda x: F.batch_norm(x, None, None, training=True), (t64(x, device),))


def test_batch_norm_eval_uses_running_stats(device):
    x = RNG.standard_normal((4, 3, 2))
    rm, rv = RNG.standard_normal(3), RNG.random(3) + 0.5
    w, b = RNG.standard_normal(3), RNG.standard_normal(3)
    out = F.batch_norm(t64(x, device), t64(rm, device, False), t64(rv, device, False), t64(w, device), t64(b, device),
                       training=False, eps=1e-3)
    ref = (x - rm[:, None]) / np.sqrt(rv[:, None] + 1e-3) * w[:, None] + b[:, None]
    np.testing.assert_allclose(out.detach().numpy(), ref, rtol=1e-12)
    assert gradcheck(lambda x, w, b: F.batch_norm(x, t64(rm, device, False), t64(rv, device, False), w, b),
                     (t64(x, device), t64(w, device), t64(b, device)))


def test_batch_norm_running_stats_converge_and_version_bumps(device):
    rm, rv = mg.zeros(2, device=device), mg.ones(2, device=device)
    v0 = rm._version
    for _ in range(60):
        x = mg.tensor(RNG.standard_normal((256, 2)).astype(np.float32) * np.array([2.0, 0.5], np.float32) + 3,
                      device=device)
        F.batch_norm(x, rm, rv, training=True, momentum=0.1)
    np.testing.assert_allclose(rm.numpy(), [3, 3], atol=0.1)
    np.testing.assert_allclose(rv.numpy(), [4, 0.25], rtol=0.1)
    assert rm.dtype == mg.float32 and rm._version > v0


def test_batch_norm_float32(device):
    x = mg.tensor(RNG.standard_normal((5, 4, 3)).astype(np.float32), requires_grad=True, device=device)
    w, b = mg.ones(4, requires_grad=True, device=device), mg.zeros(4, requires_grad=True, device=device)
    for training in (True, False):
        x.grad = w.grad = b.grad = None
        y = F.batch_norm(x, mg.zeros(4, device=device), mg.ones(4, device=device), w, b, training=training)
        y.backward(mg.randn(5, 4, 3, device=device))
        assert y.dtype == x.grad.dtype == w.grad.dtype == b.grad.dtype == mg.float32


def test_batch_norm_misuse():
    with pytest.raises(ShapeError, match="batch_norm: expected more than 1 value per channel"):
        F.batch_norm(mg.randn(1, 3), None, None, training=True)
    with pytest.raises(ShapeError, match=r"batch_norm: running_mean shape \(4,\) does not match the 3 channels"):
        F.batch_norm(mg.randn(2, 3), mg.zeros(4), mg.ones(4))
    with pytest.raises(ArgumentError, match="batch_norm: running_mean and running_var must be given"):
        F.batch_norm(mg.randn(2, 3), None, None, training=False)
