"""clip_grad_norm_ / clip_grad_value_ / parameters_to_vector against NumPy."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.nn.utils import (clip_grad_norm_, clip_grad_value_, parameters_to_vector,
                               vector_to_parameters)


def _params_with_grads(dtype=mg.float64, device=None):
    rng = np.random.default_rng(0)
    ps = [nn.Parameter(mg.zeros(*s, dtype=dtype, device=device)) for s in [(3, 4), (5,), (2, 2, 2)]]
    grads = [rng.standard_normal(p.shape) * 3 for p in ps]
    for p, g in zip(ps, grads):
        p.grad = mg.tensor(g, dtype=dtype, device=device)
    return ps, grads


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, float("inf")])
def test_clip_grad_norm_matches_numpy(norm_type, device):
    ps, grads = _params_with_grads(device=device)
    flat = np.concatenate([g.ravel() for g in grads])
    total = np.abs(flat).max() if norm_type == float("inf") else (np.abs(flat) ** norm_type).sum() ** (1 / norm_type)
    max_norm = total / 3
    out = clip_grad_norm_(ps, max_norm, norm_type=norm_type)
    assert isinstance(out, mg.Tensor) and out.shape == ()
    np.testing.assert_allclose(out.item(), total, rtol=1e-12)
    coef = max_norm / (total + 1e-6)
    for p, g in zip(ps, grads):
        np.testing.assert_allclose(p.grad.numpy(), g * coef, rtol=1e-12)


def test_clip_grad_norm_no_op_below_threshold_and_skips_missing_grads(device):
    ps, grads = _params_with_grads(device=device)
    extra = nn.Parameter(mg.zeros(2, dtype=mg.float64, device=device))  # no grad
    total = np.sqrt(sum((g ** 2).sum() for g in grads))
    out = clip_grad_norm_(ps + [extra], total * 2)
    np.testing.assert_allclose(out.item(), total, rtol=1e-12)
    for p, g in zip(ps, grads):
        np.testing.assert_array_equal(p.grad.numpy(), g)
    assert clip_grad_norm_([extra], 1.0).item() == 0.0
    single = ps[0]
    np.testing.assert_allclose(clip_grad_norm_(single, 1e9).item(), np.sqrt((grads[0] ** 2).sum()), rtol=1e-12)


def test_clip_grad_norm_float32_and_nonfinite(device):
    ps, grads = _params_with_grads(mg.float32, device)
    out = clip_grad_norm_(ps, 1.0)
    assert out.dtype == mg.float32
    total = np.sqrt(sum((g.astype(np.float32).astype(np.float64) ** 2).sum() for g in grads))
    np.testing.assert_allclose(out.item(), total, rtol=1e-5)
    assert abs(np.sqrt(sum((p.grad.numpy().astype(np.float64) ** 2).sum() for p in ps)) - 1.0) < 1e-4
    ps[1].grad.array[0] = np.nan
    with pytest.raises(RuntimeError, match="non-finite"):
        clip_grad_norm_(ps, 1.0, error_if_nonfinite=True)
    assert np.isnan(clip_grad_norm_(ps, 1.0).item())


def test_clip_grad_value(device):
    ps, grads = _params_with_grads(device=device)
    clip_grad_value_(ps, 0.5)
    for p, g in zip(ps, grads):
        np.testing.assert_array_equal(p.grad.numpy(), np.clip(g, -0.5, 0.5))


def test_clip_after_backward_in_a_model(device):
    m = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1)).double().to(device)
    m(mg.randn(16, 4, dtype=mg.float64, device=device)).pow(2).sum().backward()
    before = np.sqrt(sum((p.grad.numpy() ** 2).sum() for p in m.parameters()))
    norm = clip_grad_norm_(m.parameters(), 0.1)
    np.testing.assert_allclose(norm.item(), before, rtol=1e-12)
    after = np.sqrt(sum((p.grad.numpy() ** 2).sum() for p in m.parameters()))
    np.testing.assert_allclose(after, 0.1 * before / (before + 1e-6), rtol=1e-10)


def test_parameters_to_vector_round_trip(device):
    m = nn.Linear(3, 2).to(device)
    v = parameters_to_vector(m.parameters())
    assert v.shape == (8,)
    np.testing.assert_array_equal(v.detach().numpy(), np.concatenate([m.weight.detach().numpy().ravel(),
                                                                       m.bias.detach().numpy()]))
    vector_to_parameters(mg.arange(8.0, device=device), m.parameters())
    np.testing.assert_array_equal(m.bias.detach().numpy(), [6.0, 7.0])
    with pytest.raises(ValueError):
        vector_to_parameters(mg.arange(7.0, device=device), m.parameters())
