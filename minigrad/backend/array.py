"""``ArrayBackend``: how one device computes -- its array module, storage and host transfers -- and the cpu one.

Every tensor's storage comes from ``ArrayBackend.empty`` (factories) or passes through
``ArrayBackend.adopt`` (results of ops, in ``Function.apply``). Both defer to ``allocator`` when one is
installed: that is the hook minigrad.memory's caching pool uses, so the core never imports the pool.
The 'cuda' backends (``cuda.py``) subclass it.
"""
import numpy as np

from .device import register_backend


class ArrayBackend:
    """How one device computes: its array module, allocation and host transfers."""

    allocator = None  # object with .empty(shape, np_dtype) and .adopt(array); installed by minigrad.memory
    fused = None      # module of fused kernels (CuPy only): ops use it when set, plain array maths otherwise

    def __init__(self, dev, xp):
        self.device = dev
        self.xp = xp
        self.array_type = xp.ndarray

    def empty(self, shape, dtype):
        """Fresh storage (dtype: a NumPy dtype). The memory pool takes this over."""
        alloc = self.allocator
        return self.xp.empty(shape, dtype) if alloc is None else alloc.empty(shape, dtype)

    def adopt(self, array):
        """Make an op's freshly computed array this device's storage (identity without a pool)."""
        alloc = self.allocator
        return array if alloc is None else alloc.adopt(array)

    def asarray(self, obj, dtype=None):
        """Array on this device from host data (lists, scalars, NumPy arrays)."""
        return self.xp.asarray(obj, dtype=dtype)

    def to_host(self, array):
        """A NumPy array with the same values (a no-op on cpu)."""
        return np.asarray(array)

    def synchronize(self):
        pass


def _cpu_backend(dev):
    return ArrayBackend(dev, np)


register_backend("cpu", _cpu_backend)
