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


# --- memory statistics for CUDA devices: mirrors of minigrad.memory with device defaulting to cuda ------
def _mirror(name):
    def fn(device=None, *args, **kwargs):
        from . import memory
        return getattr(memory, name)("cuda" if device is None else device, *args, **kwargs)
    fn.__name__ = name
    fn.__doc__ = f"``minigrad.memory.{name}`` for a CUDA device (default cuda:0)."
    return fn


for _name in ("memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
              "reset_peak_memory_stats", "memory_stats", "memory_summary", "empty_cache"):
    globals()[_name] = _mirror(_name)
del _name


def set_memory_limit(nbytes, device=None):
    """Cap a CUDA device's reserved bytes (e.g. simulate an 8 GB card on a big GPU)."""
    from . import memory
    return memory.set_memory_limit(nbytes, "cuda" if device is None else device)
