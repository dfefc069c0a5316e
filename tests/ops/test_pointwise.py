"""erf / erfc, atan2 / arctan2, lerp (ops/pointwise.py), isclose / allclose (compare.py) and var_mean /
std_mean (reduce.py): values against SciPy / NumPy, float64 gradcheck, PyTorch's dtypes and errors."""
import numpy as np
import pytest
from scipy import special

import minigrad as mg
from minigrad.autograd import gradcheck
from minigrad.errors import ArgumentError, DTypeError, ShapeError

R = np.random.default_rng(1)


def T(*shape):
    return mg.tensor(R.standard_normal(shape), dtype=mg.float64, requires_grad=True)


def test_erf_erfc_values_gradients_and_aliases():
    x = T(3, 4) * 2
    np.testing.assert_allclose(mg.erf(x).detach().numpy(), special.erf(x.detach().numpy()), atol=1e-7)
    np.testing.assert_allclose(mg.erfc(x).detach().numpy(), special.erfc(x.detach().numpy()), atol=1e-7)
    assert gradcheck(mg.erf, [T(3, 4)]) and gradcheck(mg.erfc, [T(3, 4)])
    assert mg.special.erf is mg.erf and mg.special.erfc is mg.erfc
    assert mg.tensor([0.5]).erf().dtype == mg.float32 and mg.tensor([1, 2]).erf().dtype == mg.float32


def test_atan2_values_broadcasting_gradients():
    a, b = T(3, 4), T(4)
    ref = np.arctan2(a.detach().numpy(), b.detach().numpy())
    np.testing.assert_allclose(mg.atan2(a, b).detach().numpy(), ref, rtol=1e-12)
    np.testing.assert_allclose(a.arctan2(b).detach().numpy(), ref, rtol=1e-12)
    assert mg.arctan2 is mg.atan2
    assert gradcheck(mg.atan2, [a, b]) and gradcheck(lambda y: mg.atan2(y, 0.7), [a])
    assert mg.atan2(mg.tensor([1, -1]), mg.tensor([0, 0])).dtype == mg.float32   # ints give floats
    np.testing.assert_allclose(mg.atan2(mg.tensor([1.0, -1.0]), mg.tensor([0.0, 0.0])).numpy(), [np.pi / 2, -np.pi / 2])
    with pytest.raises(ArgumentError, match="atan2: input must be a Tensor"):
        mg.atan2(1.0, a)


def test_lerp_scalar_and_tensor_weight():
    s, e, w = T(2, 3), T(2, 3), T(3)
    np.testing.assert_allclose(mg.lerp(s, e, 0.25).detach().numpy(),
                               s.detach().numpy() + 0.25 * (e.detach().numpy() - s.detach().numpy()), rtol=1e-12)
    np.testing.assert_allclose(s.lerp(e, w).detach().numpy(),
                               s.detach().numpy() + w.detach().numpy() * (e.detach().numpy() - s.detach().numpy()))
    assert gradcheck(mg.lerp, [s, e, w]) and gradcheck(lambda x, y: x.lerp(y, 0.3), [s, e])
    with pytest.raises(ArgumentError, match="lerp: weight"):
        mg.lerp(s, e, "0.5")


def test_isclose_allclose():
    a = mg.tensor([1.0, float("nan"), 2.0, 1e-9])
    b = mg.tensor([1.0 + 1e-7, float("nan"), 2.1, 0.0])
    assert mg.isclose(a, b).tolist() == [True, False, False, True]
    assert a.isclose(b, equal_nan=True).tolist() == [True, True, False, True]
    assert mg.isclose(a, b, rtol=0, atol=0).tolist() == [False, False, False, False]
    assert mg.isclose(a, 2.0).tolist() == [False, False, True, False]
    assert mg.allclose(a, a, equal_nan=True) and not mg.allclose(a, b) and mg.tensor([1.0]).allclose(mg.tensor([1.0]))
    with pytest.raises(ShapeError, match="isclose"):
        mg.isclose(mg.ones(2), mg.ones(3))
    with pytest.raises(ArgumentError, match="non-negative"):
        mg.isclose(a, b, rtol=-1)


@pytest.mark.parametrize("kwargs, ddof", [({}, 1), ({"unbiased": False}, 0), ({"correction": 0}, 0),
                                          ({"correction": 2}, 2)])
def test_var_mean_std_mean(kwargs, ddof):
    x = T(3, 5)
    v, m = mg.var_mean(x, 1, **kwargs)
    np.testing.assert_allclose(v.detach().numpy(), x.detach().numpy().var(1, ddof=ddof), rtol=1e-12)
    np.testing.assert_allclose(m.detach().numpy(), x.detach().numpy().mean(1), rtol=1e-12)
    s, m2 = x.std_mean(dim=0, keepdim=True, **kwargs)
    np.testing.assert_allclose(s.detach().numpy(), x.detach().numpy().std(0, ddof=ddof, keepdims=True), rtol=1e-12)
    assert m2.shape == (1, 5)
    assert gradcheck(lambda a: mg.std_mean(a, 1, **kwargs)[0] + mg.var_mean(a, 1, **kwargs)[1], [x])
    whole = mg.std_mean(x)
    assert whole[0].shape == () and isinstance(whole, tuple)


def test_var_mean_refuses_ints():
    with pytest.raises(DTypeError):
        mg.var_mean(mg.tensor([1, 2, 3]))
