"""``mg.cuda``: is a GPU usable, how many, and (once the memory pool is installed) its memory statistics.

These never raise: without CuPy, a driver or a device they report that no GPU is available.
"""
from .backend import cuda as _backend_cuda
from .backend.device import device as _device, get_backend


def is_available():
    return _backend_cuda.probe()[0] is not None


def device_count():
    return _backend_cuda.probe()[1]


def is_emulated():
    """True when 'cuda' is the NumPy-backed test emulator (MINIGRAD_EMULATE_CUDA=1)."""
    return _backend_cuda.probe()[0] == "emulated"


def current_device():
    return 0


def synchronize(device=None):
    if is_available():
        get_backend(_device("cuda" if device is None else device)).synchronize()
