"""mg.nn.functional activations, softmax/log_softmax and dropout: NumPy references, gradcheck, dtypes."""
import math

import numpy as np
import pytest

import minigrad as mg
import minigrad.nn.functional as F
from minigrad.autograd import gradcheck
from minigrad.errors import ArgumentError, OpIndexError
from minigrad.ops.nn._util import erf_rational

RNG = np.random.default_rng(0)
_erf = np.vectorize(math.erf)


def t64(*shape, scale=1.0, requires_grad=True, device=None):
    return mg.tensor(RNG.standard_normal(shape) * scale, dtype=mg.float64, requires_grad=requires_grad,
                     device=device)


def ref_softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


REFS = {
    "relu": (F.relu, lambda x: np.maximum(x, 0)),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.2), lambda x: np.where(x > 0, x, 0.2 * x)),
    "gelu": (F.gelu, lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2)))),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"),
                  lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))),
    "sigmoid": (F.sigmoid, lambda x: 1 / (1 + np.exp(-x))),
    "tanh": (F.tanh, np.tanh),
    "silu": (F.silu, lambda x: x / (1 + np.exp(-x))),
    "softmax": (lambda x: F.softmax(x, dim=1), lambda x: ref_softmax(x, 1)),
    "softmax0": (lambda x: F.softmax(x, dim=0), lambda x: ref_softmax(x, 0)),
    "log_softmax": (lambda x: F.log_softmax(x, dim=-1), lambda x: np.log(ref_softmax(x, -1))),
}


@pytest.mark.parametrize("name", sorted(REFS))
def test_forward_matches_numpy(name, device):
    fn, ref = REFS[name]
    x = RNG.standard_normal((3, 5, 2)) * 3
    out = fn(mg.tensor(x, device=device))
    assert out.device == device
    np.testing.assert_allclose(out.numpy(), ref(x), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", sorted(REFS))
def test_gradcheck(name, device):
    fn, _ = REFS[name]
    x = t64(3, 4, 2, scale=2.0, device=device)
    if name in ("relu", "leaky_relu"):  # keep away from the kink at 0
        x.array[np.abs(x.array) < 1e-3] = 0.5
    assert gradcheck(fn, (x,))


@pytest.mark.parametrize("name", sorted(REFS))
def test_float32_preserved(name, device):
    fn, ref = REFS[name]
    x = mg.tensor(RNG.standard_normal((4, 6)).astype(np.float32), requires_grad=True, device=device)
    y = fn(x)
    assert y.dtype == mg.float32 and y.device == device
    y.backward(mg.tensor(RNG.standard_normal((4, 6)).astype(np.float32), device=device))
    assert x.grad.dtype == mg.float32 and x.grad.device == device
    np.testing.assert_allclose(y.detach().numpy(), ref(x.detach().numpy().astype(np.float64)), rtol=1e-5,
                               atol=1e-6)


def test_relu_gradient_values(device):
    x = mg.tensor([-2.0, -0.5, 0.5, 3.0], requires_grad=True, device=device)
    F.relu(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0, 0, 1, 1])


def test_tensor_methods_route_to_functional(device):
    x = mg.tensor([[-1.0, 2.0, 0.5]], device=device)
    np.testing.assert_allclose(x.relu().numpy(), [[0, 2, 0.5]])
    np.testing.assert_allclose(x.softmax(dim=-1).numpy(), ref_softmax(np.array([[-1.0, 2.0, 0.5]]), -1),
                               rtol=1e-6)


# --- erf ------------------------------------------------------------------------------------------
def test_erf_fallback_is_accurate():
    x = np.concatenate([np.linspace(-7, 7, 20001), [0.0, 0.46875, -0.46875, 4.0, -4.0, 1e-12, 30.0]])
    err = np.abs(erf_rational(np, x) - _erf(x))
    assert err.max() < 1e-7
    assert err.max() < 1e-15  # in fact about double precision


def test_gelu_forward_backward_consistent_with_fallback_erf(monkeypatch, device):
    """The pure-NumPy erf path (no SciPy) gives the same GELU and a gradient that passes gradcheck."""
    from minigrad.ops.nn import _util
    x = t64(5, 3, scale=2.0, device=device)
    with_scipy = F.gelu(x).detach().numpy()
    monkeypatch.setitem(_util._ERF, "numpy", None)
    np.testing.assert_allclose(F.gelu(x).detach().numpy(), with_scipy, rtol=1e-14, atol=1e-15)
    assert gradcheck(F.gelu, (x,))


def test_gelu_known_values(device):
    out = F.gelu(mg.tensor([0.0, 1.0, -1.0], dtype=mg.float64, device=device)).numpy()
    np.testing.assert_allclose(out, [0.0, 0.8413447460685429, -0.15865525393145707], rtol=1e-12)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_of_a_0d_tensor(approximate, device):
    """A 0-d input (a loss-like scalar): the in-place passes must not meet NumPy's 0-d -> scalar results."""
    x = mg.tensor(0.5, dtype=mg.float64, device=device, requires_grad=True)
    y = F.gelu(x, approximate=approximate)
    assert y.shape == () and y.dtype == mg.float64
    expected = F.gelu(mg.tensor([0.5], dtype=mg.float64, device=device), approximate=approximate).numpy()[0]
    np.testing.assert_allclose(y.item(), expected, rtol=1e-15)
    assert gradcheck(lambda t: F.gelu(t, approximate=approximate), (x,))


@pytest.mark.parametrize("dtype", [mg.float32, mg.float64])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_same_values_with_and_without_grad(approximate, dtype, device):
    """Forward prepares the derivative for backward only when a gradient is wanted: the values must not
    depend on it, and the derivative must match the written-out formula."""
    x = mg.tensor(np.linspace(-6, 6, 241), dtype=dtype, device=device, requires_grad=True)
    y = F.gelu(x, approximate=approximate)
    with mg.no_grad():
        y0 = F.gelu(x, approximate=approximate)
    assert not y0.requires_grad
    np.testing.assert_array_equal(y0.numpy(), y.detach().numpy())
    y.sum().backward()
    v = np.linspace(-6, 6, 241)
    if approximate == "tanh":
        k, c = np.sqrt(2 / np.pi), 0.044715
        t = np.tanh(k * (v + c * v ** 3))
        expected = 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * k * (1 + 3 * c * v * v)
    else:
        expected = 0.5 * (1 + _erf(v / np.sqrt(2))) + v * np.exp(-v * v / 2) / np.sqrt(2 * np.pi)
    tol = dict(rtol=1e-12, atol=1e-13) if dtype == mg.float64 else dict(rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(x.grad.numpy(), expected, **tol)


# --- softmax / log_softmax ------------------------------------------------------------------------
def test_softmax_stable_for_huge_logits(device):
    x = mg.tensor([[1000.0, -1000.0, 0.0], [1e4, 1e4, 1e4], [-1e4, -1e4 + 1, -1e4]], device=device)
    p = F.softmax(x, dim=1).numpy()
    assert np.all(np.isfinite(p))
    np.testing.assert_allclose(p[0], [1, 0, 0], atol=1e-7)
    np.testing.assert_allclose(p[1], [1 / 3] * 3, rtol=1e-6)
    np.testing.assert_allclose(p[2], ref_softmax(np.array([0.0, 1.0, 0.0]), 0), rtol=1e-5)
    lp = F.log_softmax(x, dim=1).numpy()
    assert np.all(np.isfinite(lp))
    np.testing.assert_allclose(lp[0], [0, -2000, -1000], rtol=1e-6)


def test_log_softmax_huge_logits_gradient_finite(device):
    x = mg.tensor([[1000.0, -1000.0, 3.0]], requires_grad=True, device=device)
    F.log_softmax(x, dim=1)[0, 1].backward()
    assert np.all(np.isfinite(x.grad.numpy()))
    np.testing.assert_allclose(x.grad.numpy(), [[-1, 1, 0]], atol=1e-6)


def test_softmax_rows_sum_to_one_and_dim_out_of_range(device):
    x = mg.randn(2, 3, 4, device=device)
    np.testing.assert_allclose(F.softmax(x, dim=-2).numpy().sum(axis=1), np.ones((2, 4)), rtol=1e-6)
    with pytest.raises(OpIndexError, match="softmax"):
        F.softmax(x, dim=3)


def test_softmax_implicit_dim_warns_like_pytorch():
    x = mg.randn(2, 3)
    with pytest.warns(UserWarning, match="implicit dimension"):
        out = F.softmax(x)
    np.testing.assert_allclose(out.numpy().sum(axis=1), [1, 1], rtol=1e-6)


# --- dropout --------------------------------------------------------------------------------------
def test_dropout_inverted_scaling_and_reproducible(device):
    g = mg.Generator().manual_seed(3)
    x = mg.ones(200, 50, requires_grad=True, device=device)
    y = F.dropout(x, p=0.3, generator=g)
    vals = np.unique(y.detach().numpy())
    np.testing.assert_allclose(vals, [0.0, 1 / 0.7], rtol=1e-6)
    kept = (y.detach().numpy() != 0).mean()
    assert abs(kept - 0.7) < 0.02
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), y.detach().numpy())  # grad = mask / (1 - p)
    y2 = F.dropout(x, p=0.3, generator=mg.Generator().manual_seed(3))
    np.testing.assert_array_equal(y2.detach().numpy(), y.detach().numpy())


def test_dropout_eval_and_edge_probabilities(device):
    x = mg.randn(4, 4, device=device)
    assert F.dropout(x, 0.5, training=False) is x
    assert F.dropout(x, 0.0) is x
    np.testing.assert_array_equal(F.dropout(x, 1.0).numpy(), np.zeros((4, 4)))


def test_dropout_gradcheck_with_fixed_mask(device):
    x = t64(6, 5, device=device)
    assert gradcheck(lambda a: F.dropout(a, 0.4, generator=mg.Generator().manual_seed(1)), (x,))


def test_dropout_float32(device):
    x = mg.randn(10, 10, requires_grad=True, device=device)
    y = F.dropout(x, 0.5)
    y.sum().backward()
    assert y.dtype == mg.float32 and x.grad.dtype == mg.float32
    assert y.device == device and x.grad.device == device


@pytest.mark.parametrize("p", [-0.1, 1.5, "a"])
def test_dropout_bad_probability(p):
    with pytest.raises(ArgumentError, match="dropout"):
        F.dropout(mg.randn(3), p)


def test_gelu_bad_approximate():
    with pytest.raises(ArgumentError, match="gelu"):
        F.gelu(mg.randn(3), approximate="fast")
