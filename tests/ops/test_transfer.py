"""to_device: a plain Function whose output lives on another device; its gradient is copied back."""
import numpy as np
import pytest

import minigrad as mg
import minigrad.memory as mem
from minigrad.memory import CachingAllocator, CPUSource
from minigrad.memory.storage import _owner_of
from minigrad.ops.transfer import ToDevice


@pytest.fixture
def cuda():
    if not mg.cuda.is_available():
        pytest.skip("no CUDA device (set MINIGRAD_EMULATE_CUDA=1 to run on the NumPy emulator)")
    return mg.device("cuda")


def test_to_device_is_a_recorded_function_and_the_gradient_comes_back(cuda):
    x = mg.randn(3, 4, dtype=mg.float64, requires_grad=True)
    y = x.to(cuda)
    assert y.device == cuda and type(y.grad_fn) is ToDevice and y.grad_fn.device == cuda
    (y * 3).sum().backward()
    assert x.grad.device == mg.device("cpu")
    np.testing.assert_array_equal(x.grad.numpy(), np.full((3, 4), 3.0))
    assert mg.autograd.gradcheck(lambda t: t.to(cuda).to("cpu") * 2, (x,))
    with mg.no_grad():
        assert x.to(cuda).grad_fn is None


def test_a_moved_tensor_lives_in_its_device_storage_only(cuda):
    """The destination's pool (if any) owns the copy; the source's pool never does."""
    with mem.enabled("cpu", allocator=CachingAllocator(CPUSource(), "cpu")):
        moved = mg.randn(16, 16).to(cuda)                   # cpu has a pool, the (emulated) cuda none
        assert _owner_of(moved.array) is None
        back = moved.to("cpu")
        assert _owner_of(back.array) is not None             # cpu's pool owns what lands on cpu
