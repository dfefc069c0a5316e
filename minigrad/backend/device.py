"""Devices. A device is a property of each tensor; the array module for an op comes from its inputs' device.

A ``Device`` names where storage lives ('cpu', 'cuda:0'); the ``ArrayBackend`` registered for its type says
how to allocate, compute on and transfer arrays there (NumPy for cpu; CuPy for cuda, added by the GPU backend).
"""
from ..errors import DeviceError
from . import dtypes


class Device:
    __slots__ = ("type", "index", "_str", "backend")

    def __init__(self, type, index=None):
        self.type = type
        self.index = index
        self._str = type if index is None else f"{type}:{index}"
        self.backend = None  # bound lazily by get_backend()

    def __repr__(self):
        return f"device(type='{self.type}'" + ("" if self.index is None else f", index={self.index}") + ")"

    def __str__(self):
        return self._str

    def __eq__(self, other):
        if isinstance(other, str):
            try:
                other = device(other)
            except DeviceError:
                return False
        return isinstance(other, Device) and other._str == self._str

    def __hash__(self):
        return hash(self._str)

    def __reduce__(self):
        return (device, (self._str,))

    @property
    def xp(self):
        """The array module (numpy or cupy) that computes on this device."""
        return get_backend(self).xp


class ToShortcuts:
    """``cpu()``, ``cuda()``, ``float()``, ``double()``, ``half()``, ``bfloat16()`` as calls of ``self.to``: one
    definition for the two classes PyTorch gives them, Tensor and Module."""
    __slots__ = ()

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to(_cuda_device(device))

    def float(self):
        return self.to(dtypes.float32)

    def double(self):
        return self.to(dtypes.float64)

    def half(self):
        return self.to(dtypes.float16)

    def bfloat16(self):
        return self.to(dtypes.bfloat16)


_CACHE = {}


def device(spec=None, index=None):
    """``mg.device('cpu' | 'cuda' | 'cuda:N')``; a Device passes through. 'cuda' means 'cuda:0'."""
    if spec is None:
        return CPU
    if isinstance(spec, Device):
        return spec
    if isinstance(spec, int) and not isinstance(spec, bool):
        spec, index = "cuda", spec
    key = (spec, index)
    dev = _CACHE.get(key)
    if dev is not None:
        return dev
    if not isinstance(spec, str):
        raise DeviceError(f"device: expected a string like 'cpu' or 'cuda:0', got {spec!r}")
    text = spec.strip().lower()
    typ, _, idx = text.partition(":")
    if typ not in ("cpu", "cuda"):
        raise DeviceError(f"device: unknown device type {spec!r} (expected 'cpu' or 'cuda[:N]')")
    if idx:
        if not idx.isdigit():
            raise DeviceError(f"device: bad device index in {spec!r}")
        if index is not None and int(idx) != index:
            raise DeviceError(f"device: {spec!r} and index={index} disagree")
        index = int(idx)
    if typ == "cpu":
        if index not in (None, 0):
            raise DeviceError(f"device: cpu has no index {index}")
        dev = CPU
    else:
        dev = Device("cuda", 0 if index is None else index)
        dev = _CACHE.setdefault(("__dev__", str(dev)), dev)
    _CACHE[key] = dev
    return dev


CPU = Device("cpu")


# --- array backends -------------------------------------------------------------------------------
_BACKENDS = {}  # device type -> factory(Device) -> ArrayBackend


def register_backend(device_type, factory):
    """Install the backend for a device type (the GPU backend registers 'cuda' this way)."""
    _BACKENDS[device_type] = factory
    for dev in list(_CACHE.values()) + [CPU]:
        if dev.type == device_type:
            dev.backend = None


def get_backend(dev):
    be = dev.backend
    if be is None:
        factory = _BACKENDS.get(dev.type)
        if factory is None:
            raise DeviceError(f"device {dev} is not available: no backend for '{dev.type}' "
                              f"(is CUDA installed? see mg.cuda.is_available())")
        be = dev.backend = factory(dev)
    return be


def _cuda_device(spec):
    """``cuda()``'s argument: None -> 'cuda', an index -> cuda:N, a device or string as it is."""
    return "cuda" if spec is None else device("cuda", spec) if isinstance(spec, int) else spec
