"""The 'cuda' device type: CuPy when a GPU is usable, or a NumPy-backed emulator for tests.

Detection never raises: cupy missing, cupy without a driver, or no device (CuPy raises CUDARuntimeError, a
RuntimeError, at the first CUDA call) all mean "no GPU". ``MINIGRAD_EMULATE_CUDA=1`` switches on the
emulator: a 'cuda' device whose arrays are NumPy arrays, so every device-dispatch, transfer, mixing-error and
pool path runs in CI without a GPU (only CuPy's own kernels are left for GPU machines).
All CuPy-specific code of minigrad is in this file and ``cuda_kernels.py``.
"""
import os

import numpy as np

from ..errors import DeviceError, DTypeError
from .array import ArrayBackend
from .device import register_backend

EMULATE_ENV = "MINIGRAD_EMULATE_CUDA"
_probe_cache = None


def probe():
    """('cupy' | 'emulated' | None, device_count), computed once, never raising."""
    global _probe_cache
    if _probe_cache is None:
        _probe_cache = _probe()
    return _probe_cache


def _probe():
    if os.environ.get(EMULATE_ENV, "") not in ("", "0"):
        return "emulated", max(1, int(os.environ.get("MINIGRAD_EMULATE_CUDA_DEVICES", "1")))
    try:
        import cupy
        n = int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # ImportError, CUDARuntimeError (a RuntimeError), driver errors...
        return None, 0
    return ("cupy", n) if n > 0 else (None, 0)


class EmulatedCudaBackend(ArrayBackend):
    """NumPy arrays standing in for device memory. Transfers copy, as real ones do."""

    def __init__(self, dev):
        super().__init__(dev, np)

    def asarray(self, obj, dtype=None):
        if isinstance(obj, np.ndarray) and obj.ndim:
            return np.array(obj, dtype=dtype, copy=True)
        return np.asarray(obj, dtype=dtype)

    def to_host(self, array):
        return np.array(array, copy=True)


class CupyBackend(ArrayBackend):  # pragma: no cover - needs a GPU
    def __init__(self, dev):
        import cupy
        from . import cuda_kernels
        super().__init__(dev, cupy)
        self._cuda_device = cupy.cuda.Device(dev.index)
        self.fused = cuda_kernels

    def empty(self, shape, dtype):
        _no_bfloat16(dtype)
        with self._cuda_device:
            return self.xp.empty(shape, dtype)

    def asarray(self, obj, dtype=None):
        _no_bfloat16(dtype if dtype is not None else getattr(obj, "dtype", None))
        with self._cuda_device:
            return self.xp.asarray(obj, dtype=dtype)

    def to_host(self, array):
        return self.xp.asnumpy(array)

    def synchronize(self):
        self._cuda_device.synchronize()


def _no_bfloat16(dtype):
    if dtype is not None and np.dtype(dtype).kind == "V":   # pragma: no cover - needs a GPU
        raise DTypeError("cuda: CuPy has no bfloat16 (minigrad's bfloat16 is NumPy's, through ml_dtypes); "
                         "use float16 on the GPU (mg.cuda.is_bf16_supported() is False)")


def _factory(dev):
    kind, count = probe()
    if kind is None:
        raise DeviceError(f"device {dev}: CUDA is not available here (no CuPy, no driver or no GPU); "
                          f"mg.cuda.is_available() is False")
    if dev.index >= count:
        raise DeviceError(f"device {dev}: only {count} CUDA device(s) available")
    return EmulatedCudaBackend(dev) if kind == "emulated" else CupyBackend(dev)


register_backend("cuda", _factory)
