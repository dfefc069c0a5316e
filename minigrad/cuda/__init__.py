"""``mg.cuda``: is a GPU usable, how many, seeding, and (once the memory pool is installed) its memory
statistics; ``mg.cuda.amp`` holds PyTorch's deprecated aliases of ``mg.amp.GradScaler`` and ``autocast``.

These never raise: without CuPy, a driver or a device they report that no GPU is available.
"""
from ..backend import cuda as _backend_cuda
from ..backend.device import device as _device, get_backend
from ..random import manual_seed as _manual_seed, seed as _seed


def is_available():
    return _backend_cuda.probe()[0] is not None


def device_count():
    return _backend_cuda.probe()[1]


def is_emulated():
    """True when 'cuda' is the NumPy-backed test emulator (MINIGRAD_EMULATE_CUDA=1)."""
    return _backend_cuda.probe()[0] == "emulated"


def current_device():
    return 0


def set_device(device):
    """Select the current GPU. minigrad drives one GPU per process (device index 0): other indices are
    refused; use ``device='cuda:N'`` on tensors and modules instead."""
    index = device if isinstance(device, int) else _device(device).index or 0
    if index != 0:
        raise ValueError(f"set_device: minigrad uses one GPU per process (cuda:0), got {device!r}")


def get_device_name(device=None):
    return "minigrad CUDA emulator (NumPy)" if is_emulated() else "CUDA device" if is_available() else ""


def is_bf16_supported(including_emulation=True):
    """False: minigrad's CUDA ops have no bfloat16 kernels (float16 is the low-precision dtype on GPU)."""
    return False


# --- seeding: minigrad draws every device's random numbers on the host from ONE generator -----------------
def manual_seed(seed):
    """Seed the generator that CUDA tensors' random numbers come from. In minigrad that is the one default
    generator of every device (numbers are drawn on the host, so a seed gives the same numbers on CPU and
    GPU): this is ``mg.manual_seed(seed)``."""
    _manual_seed(seed)


manual_seed_all = manual_seed  # one generator serves every GPU


def seed():
    """Seed the generator from fresh entropy (``mg.seed()``: the one generator every device draws from)."""
    _seed()


seed_all = seed


def synchronize(device=None):
    if is_available():
        get_backend(_device("cuda" if device is None else device)).synchronize()


# --- memory statistics for CUDA devices: mirrors of minigrad.memory with device defaulting to cuda ------
def _mirror(name):
    def fn(device=None, *args, **kwargs):
        from .. import memory
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
    from .. import memory
    return memory.set_memory_limit(nbytes, "cuda" if device is None else device)
