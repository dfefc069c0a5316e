"""sort, argsort, topk, roll and multinomial: NumPy references, gradients, PyTorch's conventions."""
import numpy as np
import pytest

import minigrad as mg
from minigrad.autograd import gradcheck
from minigrad.errors import ArgumentError, ShapeError


def test_sort_and_argsort_match_numpy_with_stable_ties(device):
    a = np.array([[3.0, 1.0, 2.0, 1.0], [0.0, 5.0, 5.0, -1.0]])
    x = mg.tensor(a, device=device)
    v, i = mg.sort(x)
    np.testing.assert_array_equal(v.numpy(), np.sort(a, axis=-1))
    np.testing.assert_array_equal(i.numpy(), np.argsort(a, axis=-1, kind="stable"))
    v, i = mg.sort(x, dim=1, descending=True)
    np.testing.assert_array_equal(v.numpy(), [[3, 2, 1, 1], [5, 5, 0, -1]])
    np.testing.assert_array_equal(i.numpy(), [[0, 2, 1, 3], [1, 2, 0, 3]])   # ties keep their order
    np.testing.assert_array_equal(mg.argsort(x, dim=0).numpy(), np.argsort(a, axis=0, kind="stable"))
    assert i.dtype == mg.int64 and v.device == device
    nan = mg.tensor([1.0, float("nan"), 0.0])
    assert np.isnan(mg.sort(nan, descending=True).values.numpy()[0])            # NaN is the largest


def test_topk_values_indices_and_gradient(device):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 6))
    x = mg.tensor(a, device=device, requires_grad=True)
    v, i = mg.topk(x, 2)
    np.testing.assert_array_equal(v.detach().numpy(), -np.sort(-a, axis=-1)[:, :2])
    np.testing.assert_array_equal(np.take_along_axis(a, i.numpy(), -1), v.detach().numpy())
    small = mg.topk(x, 3, dim=0, largest=False)
    np.testing.assert_array_equal(small.values.detach().numpy(), np.sort(a, axis=0))
    assert gradcheck(lambda t: mg.topk(t, 2, dim=1).values, (x,))
    assert gradcheck(lambda t: mg.sort(t, dim=0, descending=True).values, (x,))
    with pytest.raises(ShapeError, match="k \\(7\\) is out of range"):
        mg.topk(x, 7)
    with pytest.raises(ArgumentError, match="k must be an int"):
        mg.topk(x, 1.5)


def test_nanogpt_style_top_k_filtering():
    logits = mg.tensor([[1.0, 5.0, 3.0, 4.0]])
    v, _ = mg.topk(logits, 2)
    logits[logits < v[:, [-1]]] = -float("Inf")
    np.testing.assert_array_equal(logits.numpy(), [[-np.inf, 5, -np.inf, 4]])


def test_roll_matches_numpy_and_rolls_gradients_back(device):
    a = np.arange(12.0).reshape(3, 4)
    x = mg.tensor(a, device=device, requires_grad=True)
    np.testing.assert_array_equal(mg.roll(x, 1, 1).detach().numpy(), np.roll(a, 1, 1))
    np.testing.assert_array_equal(mg.roll(x, -5).detach().numpy(), np.roll(a, -5))
    np.testing.assert_array_equal(mg.roll(x, (1, -2), (0, 1)).detach().numpy(), np.roll(a, (1, -2), (0, 1)))
    x64 = mg.tensor(a, device=device, requires_grad=True)
    assert gradcheck(lambda t: mg.roll(t, (2, 1), (1, 0)) * mg.arange(12.0, dtype=mg.float64,
                                                                         device=device).reshape(3, 4), (x64,))
    assert gradcheck(lambda t: mg.roll(t, 3) * mg.arange(12.0, dtype=mg.float64, device=device).reshape(3, 4),
                     (x64,))
    with pytest.raises(ArgumentError, match="same length"):
        mg.roll(x, (1, 2), 0)


def test_multinomial_draws_by_weight(device):
    mg.manual_seed(0)
    w = mg.tensor([1.0, 0.0, 3.0], device=device)
    draws = mg.multinomial(w, 20000, replacement=True)
    assert draws.dtype == mg.int64 and draws.device == device and tuple(draws.shape) == (20000,)
    counts = np.bincount(draws.numpy(), minlength=3) / 20000
    np.testing.assert_allclose(counts, [0.25, 0.0, 0.75], atol=0.015)          # never a zero-weight category
    rows = mg.multinomial(mg.tensor([[1.0, 1.0, 1.0, 0.0], [0.0, 2.0, 1.0, 1.0]]), 3)
    assert tuple(rows.shape) == (2, 3)
    assert sorted(rows.numpy()[0]) == [0, 1, 2] and sorted(rows.numpy()[1]) == [1, 2, 3]   # distinct
    mg.manual_seed(1)
    first = mg.multinomial(mg.tensor([0.2, 0.3, 0.5]), 5, replacement=True)
    mg.manual_seed(1)
    np.testing.assert_array_equal(first.numpy(), mg.multinomial(mg.tensor([0.2, 0.3, 0.5]), 5, True).numpy())
    with pytest.raises(ArgumentError, match="without replacement"):
        mg.multinomial(mg.tensor([1.0, 0.0]), 2)
    with pytest.raises(ArgumentError, match="inf, nan or an element < 0"):
        mg.multinomial(mg.tensor([1.0, -1.0]), 1)
    with pytest.raises(ArgumentError, match="sums to 0"):
        mg.multinomial(mg.zeros(3), 1, replacement=True)
