"""Backends: devices, dtypes and the one place storage is obtained (``array.py``: ``ArrayBackend``).

Every tensor's storage comes from ``ArrayBackend.empty`` (factories) or passes through
``ArrayBackend.adopt`` (results of ops). Both defer to ``backend.allocator`` when one is installed:
that is the hook minigrad.memory's caching pool uses, so the core never imports the pool.
"""
from . import cuda as _cuda, dtypes  # noqa: F401  (cuda registers the 'cuda' device type; imports no CuPy yet)
from .array import ArrayBackend
from .device import CPU, Device, device, get_backend, register_backend
from .dtypes import DType, to_dtype


def empty(shape, dtype, dev=CPU):
    """The one storage function: ``empty(shape, np_dtype, device)``."""
    return get_backend(dev).empty(shape, dtype)


__all__ = ["ArrayBackend", "CPU", "DType", "Device", "device", "dtypes", "empty", "get_backend",
           "register_backend", "to_dtype"]
