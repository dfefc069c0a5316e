"""bfloat16 (``ml_dtypes``' NumPy dtype): creation, casts, float32 arithmetic rounded to bfloat16, gradients,
printing, serialization and autocast, as PyTorch's CPU bfloat16."""
import ml_dtypes
import numpy as np
import pytest

import minigrad as mg
from minigrad import nn

BF16 = np.dtype(ml_dtypes.bfloat16)


def bf16(values):
    """The values rounded to bfloat16, back in float32 (what PyTorch holds)."""
    return np.asarray(values, np.float32).astype(BF16).astype(np.float32)


def test_creation_casts_and_names():
    assert mg.bfloat16.is_floating_point and mg.bfloat16.itemsize == 2 and repr(mg.bfloat16) == "minigrad.bfloat16"
    assert mg.backend.dtypes.to_dtype("bfloat16") is mg.bfloat16 is mg.backend.dtypes.to_dtype(BF16)
    for t in (mg.zeros(2, dtype=mg.bfloat16), mg.randn(3, dtype=mg.bfloat16), mg.tensor([1.5], dtype="bfloat16"),
              mg.ones(2).bfloat16(), mg.ones(2).to(mg.bfloat16), mg.full((2,), 3.0, dtype=mg.bfloat16)):
        assert t.dtype == mg.bfloat16 and t.array.dtype == BF16 and t.is_floating_point()
    x = mg.tensor([1.0 + 2 ** -9, 3.14159])            # below bfloat16's resolution: rounded
    np.testing.assert_array_equal(x.bfloat16().float().numpy(), bf16([1.0 + 2 ** -9, 3.14159]))
    assert x.bfloat16().float().dtype == mg.float32 and x.bfloat16().double().dtype == mg.float64


def test_arithmetic_computes_in_float32_and_rounds_once():
    ones = mg.ones(10000, dtype=mg.bfloat16)
    assert ones.sum().item() == 9984.0 and ones.sum().dtype == mg.bfloat16     # float32 sum, rounded (PyTorch)
    a = np.random.default_rng(0).standard_normal((16, 32)).astype(np.float32)
    b = np.random.default_rng(1).standard_normal((32, 8)).astype(np.float32)
    ta, tb = mg.tensor(a).bfloat16(), mg.tensor(b).bfloat16()
    out = ta @ tb
    assert out.dtype == mg.bfloat16
    np.testing.assert_array_equal(out.float().numpy(), bf16(bf16(a) @ bf16(b)))
    np.testing.assert_array_equal((ta.exp() * 2).float().numpy(), bf16(bf16(np.exp(bf16(a))) * 2))
    assert (ta + mg.ones(32)).dtype == mg.float32 and (ta + mg.ones(32, dtype=mg.float64)).dtype == mg.float64


def test_gradients_reach_bfloat16_leaves_in_bfloat16():
    rng = np.random.default_rng(0)
    x = mg.tensor(rng.standard_normal((4, 3)), dtype=mg.bfloat16, requires_grad=True)
    lin = nn.Linear(3, 5).bfloat16()
    loss = nn.functional.cross_entropy(lin(x), mg.tensor([0, 1, 2, 3]))
    loss.backward()
    assert loss.dtype == mg.bfloat16 and x.grad.dtype == mg.bfloat16 and lin.weight.grad.dtype == mg.bfloat16
    ref = mg.tensor(x.float().detach().numpy(), requires_grad=True)
    ref_loss = nn.functional.cross_entropy(ref @ lin.weight.float().T.detach() + lin.bias.float().detach(),
                                           mg.tensor([0, 1, 2, 3]))
    ref_loss.backward()
    np.testing.assert_allclose(x.grad.float().numpy(), ref.grad.numpy(), rtol=0.03, atol=0.01)
    opt = mg.optim.SGD(lin.parameters(), lr=0.1)
    opt.step()
    assert lin.weight.dtype == mg.bfloat16


def test_printing_and_serialization(tmp_path):
    x = mg.tensor([0.5, 1.25, -3.0], dtype=mg.bfloat16, requires_grad=True)
    assert repr(x) == "tensor([ 0.5000,  1.2500, -3.0000], dtype=minigrad.bfloat16, requires_grad=True)"
    assert f"{x.sum():.2f}" == "-1.25"
    mg.save({"x": x, "dtype": mg.bfloat16}, tmp_path / "x.npz")
    back = mg.load(tmp_path / "x.npz", weights_only=True)
    assert back["dtype"] is mg.bfloat16 and back["x"].dtype == mg.bfloat16 and back["x"].requires_grad
    np.testing.assert_array_equal(back["x"].detach().float().numpy(), [0.5, 1.25, -3.0])


def test_autocast_accepts_bfloat16():
    lin = nn.Linear(3, 2)
    with mg.autocast(device_type="cpu", dtype=mg.bfloat16):
        y = lin(mg.randn(4, 3))
        assert y.dtype == mg.bfloat16 and mg.amp.get_autocast_dtype("cpu") == mg.bfloat16
        loss = y.float().pow(2).mean()
    loss.backward()
    assert lin.weight.grad.dtype == mg.float32 and lin.weight.dtype == mg.float32
    with pytest.raises(mg.errors.DTypeError, match="autocast"):
        mg.autocast(device_type="cpu", dtype=mg.float64)
