"""Device detection never raises, devices are per tensor, and transfers/mixing behave (cpu + emulated cuda)."""
import subprocess
import sys
import textwrap
import types

import numpy as np
import pytest

import minigrad as mg
from cupy_calls import api  # tests/cupy_calls.py: records the calls for the real-CuPy check
from minigrad.backend import cuda as backend_cuda
from minigrad.errors import DeviceError


@pytest.fixture
def fresh_probe(monkeypatch):
    """Forget the cached probe result so a test can fake what CuPy does."""
    monkeypatch.setattr(backend_cuda, "_probe_cache", None)
    monkeypatch.delenv(backend_cuda.EMULATE_ENV, raising=False)
    yield monkeypatch
    backend_cuda._probe_cache = None


def _fake_cupy(count=None, error=None):
    def get_device_count():
        if error is not None:
            raise error
        return count
    runtime = types.SimpleNamespace(getDeviceCount=api("cupy.cuda.runtime.getDeviceCount")(get_device_count))
    return types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=runtime))


class CUDARuntimeError(RuntimeError):
    """What CuPy raises at the first CUDA call without a driver or device."""


@pytest.mark.parametrize("fake, expected", [
    (None, (None, 0)),                                                           # cupy not installed
    (_fake_cupy(error=CUDARuntimeError("cudaErrorInsufficientDriver")), (None, 0)),  # no driver
    (_fake_cupy(error=CUDARuntimeError("cudaErrorNoDevice")), (None, 0)),        # no device
    (_fake_cupy(count=0), (None, 0)),
    (_fake_cupy(count=2), ("cupy", 2)),
])
def test_probe_never_raises(fresh_probe, fake, expected):
    fresh_probe.setitem(sys.modules, "cupy", fake)  # None makes `import cupy` raise ImportError
    assert backend_cuda.probe() == expected
    assert mg.cuda.is_available() is (expected[0] is not None)
    assert mg.cuda.device_count() == expected[1]


def test_import_minigrad_without_cuda_and_cuda_device_gives_a_clear_error():
    code = textwrap.dedent("""
        import sys; sys.modules['cupy'] = None          # as if CuPy were not installed
        import minigrad as mg
        assert not mg.cuda.is_available() and mg.cuda.device_count() == 0
        try:
            mg.zeros(2, device='cuda')
        except mg.errors.DeviceError as e:
            print('DeviceError:', e)
    """)
    env = {k: v for k, v in __import__("os").environ.items() if k != "MINIGRAD_EMULATE_CUDA"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "DeviceError: device cuda:0: CUDA is not available" in out.stdout


def test_device_parsing_and_equality():
    assert str(mg.device("cuda")) == "cuda:0" and mg.device("cuda:1").index == 1
    assert mg.device("cpu") == "cpu" and mg.device("cuda:0") == mg.device("cuda")
    for bad in ("tpu", "cuda:x", "cpu:3"):
        with pytest.raises(DeviceError, match="device"):
            mg.device(bad)


def test_tensors_carry_their_device(device):
    x = mg.randn(3, 4, device=device, requires_grad=True)
    y = (x * 2).relu().sum()
    assert x.device == device and y.device == device
    y.backward()
    assert x.grad.device == device
    assert np.allclose(x.grad.numpy(), 2 * (x.detach().numpy() > 0))


def test_transfer_round_trip_and_gradient_flows_back(device):
    x = mg.randn(5, requires_grad=True)
    on = x.to(device)
    assert on.device == device and np.array_equal(on.detach().numpy(), x.detach().numpy())
    (on * on).sum().backward()
    assert x.grad.device == mg.device("cpu")
    assert np.allclose(x.grad.numpy(), 2 * x.detach().numpy())


def test_mixing_devices_names_the_op_and_both_devices():
    if not mg.cuda.is_available():
        pytest.skip("needs a cuda device (real or MINIGRAD_EMULATE_CUDA=1)")
    a, b = mg.ones(2), mg.ones(2, device="cuda")
    with pytest.raises(DeviceError, match=r"add: tensors on different devices \(cpu, cuda:0\)"):
        a + b
    with pytest.raises(DeviceError, match=r"matmul: tensors on different devices"):
        mg.ones(2, 2) @ mg.ones(2, 2, device="cuda")


def test_module_to_moves_parameters_in_place(device):
    model = mg.nn.Linear(3, 2)
    w = model.weight
    opt = mg.optim.SGD(model.parameters(), lr=0.1)
    model.to(device)
    assert model.weight is w and w.device == device
    loss = model(mg.ones(4, 3, device=device)).sum()
    loss.backward()
    before = w.detach().numpy().copy()
    opt.step()
    assert not np.allclose(before, w.detach().numpy())
