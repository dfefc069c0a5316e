"""nn.init: bounds and statistics over large tensors, gains, fans, generators, no_grad on parameters."""
import math

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.nn import init


def _np(t):
    return t.detach().numpy()


def test_calculate_gain_table():
    assert init.calculate_gain("linear") == 1 and init.calculate_gain("conv2d") == 1
    assert init.calculate_gain("sigmoid") == 1
    assert init.calculate_gain("tanh") == pytest.approx(5 / 3)
    assert init.calculate_gain("relu") == pytest.approx(math.sqrt(2))
    assert init.calculate_gain("leaky_relu") == pytest.approx(math.sqrt(2 / (1 + 0.01 ** 2)))
    assert init.calculate_gain("leaky_relu", 0.2) == pytest.approx(math.sqrt(2 / 1.04))
    assert init.calculate_gain("selu") == 0.75
    with pytest.raises(ValueError):
        init.calculate_gain("swish")


def test_fans():
    assert init._calculate_fan_in_and_fan_out(mg.empty(7, 3)) == (3, 7)
    assert init._calculate_fan_in_and_fan_out(mg.empty(8, 4, 3, 5)) == (60, 120)
    with pytest.raises(ValueError):
        init.xavier_uniform_(mg.empty(5))


def test_uniform_normal_constant_on_parameters(device):
    p = nn.Parameter(mg.empty(400, 500, device=device))
    v0 = p._version
    init.uniform_(p, -2, 3)
    a = _np(p)
    assert a.min() >= -2 and a.max() <= 3 and abs(a.mean() - 0.5) < 0.02
    assert p._version > v0 and p.requires_grad and p.grad_fn is None and p.device == device
    init.normal_(p, 1.0, 0.5)
    assert abs(_np(p).mean() - 1) < 0.01 and abs(_np(p).std() - 0.5) < 0.01
    init.constant_(p, 0.25)
    assert np.all(_np(p) == 0.25)
    init.zeros_(p)
    assert not _np(p).any()
    init.ones_(p)
    assert np.all(_np(p) == 1)
    e = init.eye_(mg.empty(3, 4, device=device))
    np.testing.assert_array_equal(_np(e), np.eye(3, 4))


def test_kaiming_uniform_bound_and_variance(device):
    w = mg.empty(500, 400, device=device)
    init.kaiming_uniform_(w, nonlinearity="relu")
    bound = math.sqrt(2) * math.sqrt(3 / 400)
    a = _np(w)
    assert a.max() <= bound and a.min() >= -bound and a.max() > 0.99 * bound
    assert abs(a.var() - 2 / 400) / (2 / 400) < 0.02
    init.kaiming_uniform_(w, a=math.sqrt(5))          # Linear's default: U(±1/sqrt(fan_in))
    assert np.abs(_np(w)).max() <= 1 / math.sqrt(400)
    init.kaiming_uniform_(w, mode="fan_out", nonlinearity="relu")
    assert np.abs(_np(w)).max() <= math.sqrt(6 / 500)
    with pytest.raises(ValueError):
        init.kaiming_uniform_(w, mode="fan_avg")


def test_kaiming_normal_and_xavier_variances(device):
    w = mg.empty(300, 200, 3, device=device)
    fan_in, fan_out = 600, 900
    init.kaiming_normal_(w, nonlinearity="relu")
    assert abs(_np(w).std() - math.sqrt(2 / fan_in)) / math.sqrt(2 / fan_in) < 0.01
    init.xavier_uniform_(w, gain=2.0)
    b = 2 * math.sqrt(6 / (fan_in + fan_out))
    assert np.abs(_np(w)).max() <= b
    assert abs(_np(w).var() - 4 * 2 / (fan_in + fan_out)) / (8 / (fan_in + fan_out)) < 0.02
    init.xavier_normal_(w)
    assert abs(_np(w).var() - 2 / (fan_in + fan_out)) / (2 / (fan_in + fan_out)) < 0.02


def test_trunc_normal_orthogonal_dirac(device):
    t = init.trunc_normal_(mg.empty(100, 100, device=device), std=1.0, a=-1.0, b=1.5)
    assert _np(t).min() >= -1 and _np(t).max() <= 1.5
    q = init.orthogonal_(mg.empty(6, 10, dtype=mg.float64, device=device))
    np.testing.assert_allclose(_np(q) @ _np(q).T, np.eye(6), atol=1e-12)
    assert t.device == q.device == device
    d = init.dirac_(mg.empty(3, 3, 3, 3, device=device))
    x = mg.randn(1, 3, 5, 5, device=device)
    np.testing.assert_allclose(_np(mg.nn.functional.conv2d(x, d, padding=1)), _np(x), rtol=1e-6)


def test_generator_makes_init_reproducible(device):
    g = mg.Generator().manual_seed(7)
    a = _np(init.kaiming_uniform_(mg.empty(4, 5, device=device), generator=g)).copy()
    g.manual_seed(7)
    b = _np(init.kaiming_uniform_(mg.empty(4, 5, device=device), generator=g))
    np.testing.assert_array_equal(a, b)
    mg.manual_seed(3)
    l1 = nn.Linear(5, 4, device=device)
    mg.manual_seed(3)
    l2 = nn.Linear(5, 4, device=device)
    np.testing.assert_array_equal(_np(l1.weight), _np(l2.weight))


def test_layer_default_inits(device):
    conv = nn.Conv2d(8, 16, 3, device=device)
    bound = 1 / math.sqrt(8 * 9)
    assert np.abs(_np(conv.weight)).max() <= bound and np.abs(_np(conv.bias)).max() <= bound
    big = nn.Linear(1000, 300, device=device)
    # U(±1/sqrt(fan_in)) has variance 1 / (3 fan_in)
    assert abs(_np(big.weight).var() * 3000 - 1) < 0.02
    bn = nn.BatchNorm2d(4, device=device)
    assert np.all(_np(bn.weight) == 1) and not _np(bn.bias).any()
