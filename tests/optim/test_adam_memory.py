"""AdamW's update without parameter-sized temporaries, and its bfloat16 moments (stochastic rounding)."""
import math
import tracemalloc

import ml_dtypes
import numpy as np
import pytest

import minigrad as mg
from minigrad.optim.adam import CHUNK, adam_update, round_stochastic, Noise


def reference(p, g, m, v, step, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8, wd=1e-2):
    p = p * (1 - lr * wd)
    m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
    return p - lr / (1 - b1 ** step) * m / (np.sqrt(v) / math.sqrt(1 - b2 ** step) + eps), m, v


def test_the_update_in_pieces_matches_the_formula_and_makes_no_parameter_sized_temporary():
    rng = np.random.default_rng(0)
    n = 3 * CHUNK + 17                              # several pieces and a ragged last one
    p = rng.standard_normal(n).astype(np.float32)
    m, v = np.zeros_like(p), np.zeros_like(p)
    P, M, V = p.astype(np.float64), m.astype(np.float64), v.astype(np.float64)
    for step in range(1, 4):
        g = rng.standard_normal(n).astype(np.float32)
        tracemalloc.start()
        adam_update(np, p, g, m, v, None, step, 1e-3, 0.9, 0.999, 1e-8, 1e-2, True, False)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        P, M, V = reference(P, g, M, V, step)
        assert peak <= 3 * CHUNK * 4            # two work buffers of a piece, not n * 4 bytes
    np.testing.assert_allclose(p, P, rtol=0, atol=2e-6)
    np.testing.assert_allclose(m, M, rtol=1e-5, atol=1e-6)     # lerp's rounding, as PyTorch's
    np.testing.assert_allclose(v, V, rtol=1e-5, atol=1e-9)


def test_stochastic_rounding_is_unbiased_where_round_to_nearest_sticks():
    x = np.full(CHUNK, 1.0 + 2 ** -10, dtype=np.float32)     # a quarter of bfloat16's unit above 1
    out = np.empty(x.size, ml_dtypes.bfloat16)
    vals = []
    for step in range(1, 9):                                 # the pieces of several steps
        round_stochastic(np, x.copy(), out, Noise(np, x, step))
        vals.append(out.astype(np.float32))
    vals = np.concatenate(vals)
    assert set(np.unique(vals)) == {1.0, 1.0 + 2 ** -7}
    assert vals.mean() == pytest.approx(1.0 + 2 ** -10, abs=2e-5)
    assert x.astype(ml_dtypes.bfloat16).astype(np.float32).mean() == 1.0      # round to nearest: stuck


def test_bfloat16_moments_halve_the_state_and_track_float32_adam():
    rng = np.random.default_rng(1)
    target = rng.standard_normal((64, 32)).astype(np.float32)
    runs = {}
    for bf16 in (False, True):
        w = mg.tensor(np.zeros((64, 32), np.float32), requires_grad=True)
        opt = mg.optim.AdamW([w], lr=1e-2, bf16_state=bf16)
        for _ in range(300):
            opt.zero_grad()
            ((w - mg.tensor(target)) ** 2).mean().backward()
            opt.step()
        st = opt.state[w]
        runs[bf16] = (w.detach().numpy().copy(), st)
    (w32, s32), (w16, s16) = runs[False], runs[True]
    assert s16["exp_avg"].dtype == mg.bfloat16 and s16["exp_avg_sq"].dtype == mg.bfloat16
    assert s16["exp_avg"].array.nbytes * 2 == s32["exp_avg"].array.nbytes
    assert np.abs(w32 - target).mean() < 0.05 and np.abs(w16 - target).mean() < 0.05   # both converge...
    assert np.abs(w16 - w32).mean() < 0.002                                            # ...the same way
    v32, v16 = s32["exp_avg_sq"].numpy(), s16["exp_avg_sq"].numpy().astype(np.float32)
    assert np.abs(v16 - v32).mean() < 0.05 * np.abs(v32).mean()     # the second moment decays as in float32


def test_the_state_dtype_can_change_between_steps_and_is_saved_as_a_flag():
    w = mg.tensor(np.ones(10, np.float32), requires_grad=True)
    opt = mg.optim.AdamW([w], lr=1e-2)
    w.grad = mg.ones(10)
    opt.step()
    assert opt.state[w]["exp_avg"].dtype == mg.float32
    opt.param_groups[0]["bf16_state"] = True
    opt.step()
    assert opt.state[w]["exp_avg_sq"].dtype == mg.bfloat16 and opt.state_dict()["param_groups"][0]["bf16_state"]
    with pytest.raises(mg.errors.ArgumentError, match="amsgrad"):
        mg.optim.Adam([w], amsgrad=True, bf16_state=True)
