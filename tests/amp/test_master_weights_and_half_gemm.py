"""master_weights: float16 models keep float32 masters (small updates survive); float16 GEMMs on NumPy
accumulate in float32 (backend/gemm.py): float16 in, float32 accumulate, float16 out, in every GEMM op."""
import numpy as np
import pytest

import minigrad as mg
import minigrad.nn.functional as F
from minigrad import nn, optim
from minigrad.backend.gemm import matmul


def test_updates_below_float16_spacing_vanish_without_masters_and_survive_with_them():
    # near 1.0 float16's spacing is 2**-10 ~ 9.8e-4: an update of 1e-4 rounds away
    plain = nn.Parameter(mg.ones(4).half())
    model = nn.Parameter(mg.ones(4).half())
    mw = mg.amp.master_weights([model])
    o_plain, o_master = optim.SGD([plain], lr=1e-4), optim.SGD(mw.parameters(), lr=1e-4)
    for _ in range(100):
        for p, opt in ((plain, o_plain), (model, None)):
            p.grad = None
            (p.float().sum()).backward()      # gradient 1 everywhere
        o_plain.step()
        mw.step(o_master)
    assert (plain.detach().numpy() == 1.0).all()                          # 100 updates lost
    np.testing.assert_allclose(mw.parameters()[0].detach().numpy(), 1 - 100 * 1e-4, rtol=1e-5)
    np.testing.assert_allclose(model.detach().numpy().astype(np.float32), 0.99, atol=1e-3)
    assert model.dtype == mg.float16 and mw.parameters()[0].dtype == mg.float32


def test_master_weights_param_groups_zero_grad_and_skipped_steps_leave_the_model_untouched():
    mg.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 2)).half()
    mw = mg.amp.master_weights(model)
    first, second = list(model[0].parameters()), list(model[2].parameters())
    opt = optim.Adam([{"params": mw.masters(first), "lr": 1e-2}, {"params": mw.masters(second), "lr": 1e-3}])
    assert mw.masters(first)[0] is mw.parameters()[0]
    scaler = mg.amp.GradScaler(init_scale=256.0)
    x, t = mg.randn(5, 4).half(), mg.tensor([0, 1, 0, 1, 1])
    scaler.scale(F.cross_entropy(model(x).float(), t)).backward()
    model[2].weight.grad.array[0, 0] = np.inf
    before = [p.detach().numpy().copy() for p in model.parameters()]
    assert mw.step(opt, scaler) is None
    scaler.update()
    assert all((b == p.detach().numpy()).all() for b, p in zip(before, model.parameters()))
    assert scaler.get_scale() == 128.0 and not opt.state
    mw.zero_grad()
    scaler.scale(F.cross_entropy(model(x).float(), t)).backward()
    mw.step(opt, scaler)
    assert all(not (b == p.detach().numpy()).all() for b, p in zip(before, model.parameters()))
    assert all(p.grad is None for p in model.parameters())   # float16 gradients released into the masters
    with pytest.raises(ValueError, match="not one of"):
        mw.masters([nn.Parameter(mg.ones(2))])


@pytest.mark.parametrize("shapes", [((5, 7), (7, 3)), ((2, 5, 7), (7, 3)), ((2, 5, 7), (2, 7, 3)), ((7,), (7,)),
                                    ((7,), (7, 3)), ((5, 7), (7,))])
def test_half_matmul_is_float32_accumulation_rounded_once(shapes):
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(s).astype(np.float16) for s in shapes)
    ref = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)
    got = matmul(np, a, b)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, ref)
    out = np.empty(ref.shape, np.float16)
    if out.ndim:
        assert matmul(np, a, b, out=out) is out
        np.testing.assert_array_equal(out, ref)
    np.testing.assert_array_equal(matmul(np, a.astype(np.float32), b.astype(np.float32)),
                                  a.astype(np.float32) @ b.astype(np.float32))


@pytest.mark.parametrize("op", ["matmul", "linear", "conv2d", "attention"])
def test_gemm_ops_in_float16_forward_and_backward_match_float32(op):
    mg.manual_seed(3)
    if op == "matmul":
        shapes, fn = [(3, 4, 5), (5, 6)], lambda a, b: a @ b
    elif op == "linear":
        shapes, fn = [(4, 5), (6, 5), (6,)], F.linear
    elif op == "conv2d":
        shapes, fn = [(2, 3, 6, 6), (4, 3, 3, 3), (4,)], lambda x, w, b: F.conv2d(x, w, b, padding=1)
    else:
        shapes, fn = [(2, 5, 4)] * 3, lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)
    xs = [mg.randn(*s) for s in shapes]
    res = {}
    for dt in (mg.float32, mg.float16):
        ins = [x.detach().to(dt).requires_grad_() for x in xs]
        y = fn(*ins)
        y.backward(mg.ones(*y.shape, dtype=dt))
        assert y.dtype == dt and all(i.grad.dtype == dt for i in ins)
        res[dt] = [y.detach().numpy().astype(np.float32)] + [i.grad.numpy().astype(np.float32) for i in ins]
    for lo, hi in zip(res[mg.float16], res[mg.float32]):
        np.testing.assert_allclose(lo, hi, rtol=1e-2, atol=1e-2 * max(1.0, float(np.abs(hi).max())))
