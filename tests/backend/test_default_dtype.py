"""set_default_dtype / get_default_dtype (process-wide, as PyTorch's) and Tensor(3, 4) from sizes."""
import threading

import numpy as np
import pytest

import minigrad as mg
from minigrad.errors import ArgumentTypeError, DTypeError, ShapeError


@pytest.fixture
def float64_default():
    mg.set_default_dtype(mg.float64)
    yield
    mg.set_default_dtype(mg.float32)


def test_default_is_float32():
    assert mg.get_default_dtype() == mg.float32 and mg.tensor([1.0]).dtype == mg.float32


def test_float64_default_reaches_creation_and_arithmetic(float64_default):
    assert mg.get_default_dtype() == mg.float64
    for t in (mg.tensor([1.0]), mg.zeros(2), mg.ones(2), mg.rand(2), mg.randn(2), mg.arange(0.0, 1.0, 0.5),
              mg.linspace(0, 1, 3), mg.eye(2), mg.full((2,), 1.5), mg.Tensor(2), mg.Tensor([1, 2]),
              mg.tensor([1, 2]) / 2, mg.nn.Linear(2, 2).weight):
        assert t.dtype == mg.float64, t
    assert mg.tensor([1, 2]).dtype == mg.int64 and mg.tensor(np.ones(2, np.float32)).dtype == mg.float32


def test_the_setting_is_process_wide(float64_default):
    seen = []
    thread = threading.Thread(target=lambda: seen.append(mg.zeros(1).dtype))
    thread.start()
    thread.join()
    assert seen == [mg.float64]


def test_only_float32_and_float64():
    with pytest.raises(DTypeError, match="float32 and float64"):
        mg.set_default_dtype(mg.int64)
    with pytest.raises(DTypeError, match="float32 and float64"):
        mg.set_default_dtype(mg.float16)
    assert mg.get_default_dtype() == mg.float32


def test_tensor_from_sizes_or_data():
    assert mg.Tensor(3, 4).shape == (3, 4) and mg.Tensor(3, 4).dtype == mg.float32
    assert mg.Tensor(3, 4).sum().item() == 0                       # "uninitialised" is zeros here
    assert mg.Tensor(mg.Size([2, 5])).shape == (2, 5) and mg.Tensor().shape == (0,)
    assert mg.Tensor([1, 2]).tolist() == [1.0, 2.0] and mg.Tensor([1, 2]).dtype == mg.float32   # as torch.Tensor
    assert mg.Tensor(np.array([1.0, 2.0])).dtype == mg.float64    # arrays keep their dtype
    assert mg.FloatTensor(2, 2).shape == (2, 2) and mg.Tensor([1.0, 2.0], requires_grad=True).requires_grad
    assert isinstance(mg.Tensor(2, 2), mg.Tensor)
    with pytest.raises(ShapeError, match="non-negative"):
        mg.Tensor(-1, 2)
    with pytest.raises(ArgumentTypeError, match="one data argument or sizes"):
        mg.Tensor(3, "a")
