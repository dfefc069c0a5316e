"""Edge cases whose inf/NaN results are part of the maths: the values PyTorch gives, and no NumPy
RuntimeWarning (PyTorch is silent there)."""
import warnings

import numpy as np
import pytest

import minigrad as mg


def _silently(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        return fn()


def test_sqrt_backward_at_zero_is_inf():
    x = mg.zeros(2, requires_grad=True)
    _silently(lambda: mg.sqrt(x).sum().backward())
    assert np.all(np.isinf(x.grad.numpy()))


@pytest.mark.parametrize("fn", [mg.softmax, mg.log_softmax])
def test_a_fully_masked_softmax_row_is_nan_and_the_others_are_untouched(fn):
    x = mg.tensor([[float("-inf")] * 3, [0.0, 1.0, 2.0]], requires_grad=True)
    out = _silently(lambda: fn(x, -1))
    assert np.all(np.isnan(out.detach().numpy()[0]))
    np.testing.assert_allclose(out.detach().numpy()[1], fn(mg.tensor([0.0, 1.0, 2.0]), -1).numpy(), rtol=1e-6)
    _silently(lambda: out[1].sum().backward())
    scores = mg.randn(1, 2, 3, 3).masked_fill(mg.ones(3, 3, dtype=mg.bool), float("-inf"))
    assert np.all(np.isnan(_silently(lambda: mg.softmax(scores, -1)).numpy()))


def test_log_of_zero_pow_and_rsqrt_at_zero():
    mask = _silently(lambda: mg.log(mg.tril(mg.ones(3, 3))))          # word_language_model's causal mask
    np.testing.assert_array_equal(mask.numpy(), [[0, -np.inf, -np.inf], [0, 0, -np.inf], [0, 0, 0]])
    x = mg.zeros(2, requires_grad=True)
    y = _silently(lambda: x ** -1.0)
    assert np.all(np.isinf(y.detach().numpy()))
    _silently(lambda: y.sum().backward())
    assert np.all(np.isinf(_silently(lambda: mg.rsqrt(mg.zeros(2))).numpy()))
    z = mg.zeros(2, requires_grad=True)
    _silently(lambda: mg.log(z).sum().backward())
    assert np.all(np.isinf(z.grad.numpy()))
