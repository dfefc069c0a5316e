"""The amp kernels of minigrad/backend/cuda_kernels.py (``amp_unscale_``, ``amp_cast_copy_``), compiled with
g++ behind the fake cupy (tests/backend/cupy_on_cpu.py), against NumPy; and the wiring: GradScaler and
master_weights take them on a device whose backend has them (the emulated 'cuda', MINIGRAD_EMULATE_CUDA=1).
The fake cupy has no float16 C type, so the kernels are checked in float32/float64 (same source, T generic).
"""
import shutil

import numpy as np
import pytest

import minigrad as mg
import minigrad.nn.functional as F
from minigrad import nn, optim
# the fixtures: cuda_kernels behind the fake cupy, and the emulated 'cuda' using them (counting calls)
from test_cuda_kernels_on_cpu import ck, fused_calls  # noqa: F401

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to compile the kernels on CPU")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bad", [None, np.inf, -np.inf, np.nan])
def test_unscale_matches_numpy_and_flags_inf_nan(ck, dtype, bad):
    rng = np.random.default_rng(0)
    grads = [(rng.standard_normal(s) * 1e3).astype(dtype) for s in ((5, 7), (13,), (2, 3, 4))]
    if bad is not None:
        grads[1][6] = bad
    expect = [g * dtype(2.0 ** -10) for g in grads]
    flag = np.zeros(1, np.int32)
    ck.amp_unscale_(grads, 2.0 ** -10, flag)
    assert flag[0] == (bad is not None)
    for g, e in zip(grads, expect):
        assert g.dtype == dtype
        np.testing.assert_array_equal(g, e)      # a power of two: exact, as NumPy's


def test_unscale_flag_is_sticky_across_calls_and_overflow_counts(ck):
    flag = np.zeros(1, np.int32)
    ck.amp_unscale_([np.array([np.inf], np.float32)], 1.0, flag)
    ck.amp_unscale_([np.ones(4, np.float32)], 1.0, flag)
    assert flag[0] == 1
    flag[0] = 0
    big = np.array([3e38], np.float32)
    ck.amp_unscale_([big], 4.0, flag)             # finite input, product overflows float32
    assert flag[0] == 1 and np.isinf(big[0])


@pytest.mark.parametrize("src_dt,dst_dt", [(np.float32, np.float64), (np.float64, np.float32)])
def test_cast_copy_writes_in_place(ck, src_dt, dst_dt):
    src = np.linspace(-3, 3, 24).astype(src_dt).reshape(4, 6)
    dst = np.zeros((4, 6), dst_dt)
    out = ck.amp_cast_copy_(dst, src)
    assert out is dst
    np.testing.assert_array_equal(dst, src.astype(dst_dt))


def _model(dtype):
    mg.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).to(dtype)


def test_grad_scaler_on_cuda_uses_the_fused_unscale_and_matches_cpu(fused_calls):
    results = {}
    for dev in ("cpu", "cuda"):
        model = _model(mg.float32).to(dev)
        opt = optim.SGD(model.parameters(), lr=0.1)
        scaler = mg.amp.GradScaler(init_scale=64.0)
        x, t = mg.randn(6, 4).to(dev), mg.tensor([0, 1, 2, 0, 1, 2], device=dev)
        scaler.scale(F.cross_entropy(model(x), t)).backward()
        scaler.step(opt)
        scaler.update()
        results[dev] = [p.detach().numpy() for p in model.parameters()]
        scaler.scale(F.cross_entropy(model(x), t)).backward()
        list(model.parameters())[1].grad.array[2] = np.nan
        assert scaler.step(opt) is None
        scaler.update()
        assert scaler.get_scale() == 32.0
    assert fused_calls["amp_unscale_"] == 2        # one call per step for all gradients of the device
    for a, b in zip(results["cpu"], results["cuda"]):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_master_weights_on_cuda_use_the_fused_cast_copy(fused_calls):
    model = _model(mg.float64).to("cuda")          # the fake cupy compiles float32/float64 only
    mw = mg.amp.master_weights(model)
    opt = optim.SGD(mw.parameters(), lr=0.1)
    x, t = mg.randn(6, 4, dtype=mg.float64).to("cuda"), mg.tensor([0, 1, 2, 0, 1, 2], device="cuda")
    F.cross_entropy(model(x), t).backward()
    mw.step(opt)
    assert fused_calls["amp_cast_copy_"] == 2 * 4  # 4 gradients widened, 4 masters rounded back
    for p, m in zip(model.parameters(), mw.parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), m.detach().numpy().astype(np.float64))
