"""``mg.accelerator``: PyTorch's device-agnostic questions ("is there an accelerator, which one?").

minigrad's one accelerator type is CUDA (CuPy, or the NumPy emulator with MINIGRAD_EMULATE_CUDA=1), one
device per process::

    device = mg.accelerator.current_accelerator() if mg.accelerator.is_available() else mg.device("cpu")
"""
from . import cuda as _cuda
from .backend.device import device as _device


def is_available():
    return _cuda.is_available()


def current_accelerator(check_available=False):
    """``device('cuda')`` when CUDA is usable, else None (PyTorch returns None when there is none)."""
    return _device("cuda") if _cuda.is_available() else None


def device_count():
    return _cuda.device_count()


def current_device_index():
    return _cuda.current_device() if _cuda.is_available() else -1


def set_device_index(device):
    _cuda.set_device(device)


set_device_idx = set_device_index


def synchronize(device=None):
    _cuda.synchronize(device)
