"""minigrad dtypes: thin, printable names over NumPy dtypes (``mg.float32`` prints like ``torch.float32``).

``bfloat16`` is the ``ml_dtypes`` package's NumPy dtype (8 exponent bits, as float32, and 8 significant
bits). NumPy files it under kind ``"V"`` (a user-defined dtype), not ``"f"``: minigrad asks
``dtype.kind in FLOAT_KINDS`` where it means "floating point" of an array. Ops on bfloat16 compute in
float32 and round their results to bfloat16 (``autograd/extensions.py: bfloat16_casts``), as PyTorch's
CPU kernels do.
"""
import ml_dtypes
import numpy as np

from ..errors import DTypeError

FLOAT_KINDS = "fV"   # NumPy kinds of minigrad's floating dtypes ("V": bfloat16; no other "V" dtype is accepted)


class DType:
    __slots__ = ("name", "np_dtype", "is_floating_point", "itemsize")

    def __init__(self, name, np_dtype):
        self.name = name
        self.np_dtype = np.dtype(np_dtype)
        self.is_floating_point = self.np_dtype.kind in FLOAT_KINDS
        self.itemsize = self.np_dtype.itemsize

    def __repr__(self):
        return f"minigrad.{self.name}"

    def __reduce__(self):  # pickles (DataLoader workers) as the module-level singleton
        return (to_dtype, (self.name,))


float16 = DType("float16", np.float16)
bfloat16 = DType("bfloat16", ml_dtypes.bfloat16)
float32 = DType("float32", np.float32)
float64 = DType("float64", np.float64)
int8 = DType("int8", np.int8)
uint8 = DType("uint8", np.uint8)
int16 = DType("int16", np.int16)
int32 = DType("int32", np.int32)
int64 = DType("int64", np.int64)
bool_ = DType("bool", np.bool_)
half, float, double, long, int = float16, float32, float64, int64, int32  # PyTorch aliases

ALL = (float16, bfloat16, float32, float64, int8, uint8, int16, int32, int64, bool_)
_BY_NP = {d.np_dtype: d for d in ALL}
_BY_NAME = {d.name: d for d in ALL}
_BY_NAME.update(half=float16, float=float32, double=float64, long=int64, int=int32)

default_float = float32   # process-wide, as PyTorch's: read as ``dtypes.default_float`` at each use


def set_default_dtype(d):
    """PyTorch's ``torch.set_default_dtype``: the dtype of Python floats in ``tensor([1.0])``, of ``zeros``,
    ``rand``... and of int / float arithmetic. Process-wide (every thread), as in PyTorch; float32 or float64."""
    global default_float
    dt = to_dtype(d)
    if dt not in (float32, float64):
        raise DTypeError(f"set_default_dtype: minigrad supports float32 and float64 as the default dtype, "
                         f"got {dt.name}")
    default_float = dt


def get_default_dtype():
    """The default floating-point dtype (float32 unless ``set_default_dtype`` changed it)."""
    return default_float


def from_numpy_dtype(np_dtype):
    """The minigrad dtype of a NumPy dtype (KeyError-free: unknown dtypes get a clear error)."""
    try:
        return _BY_NP[np_dtype]
    except KeyError:
        d = np.dtype(np_dtype)
        if d in _BY_NP:
            return _BY_NP[d]
        raise DTypeError(f"dtype {d} is not supported by minigrad (supported: "
                         f"{', '.join(x.name for x in ALL)})") from None


def to_dtype(spec):
    """Accept mg.float32, 'float32', np.float32 or np.dtype('float32'); return a DType."""
    if isinstance(spec, DType):
        return spec
    if isinstance(spec, str) and spec in _BY_NAME:
        return _BY_NAME[spec]
    if spec is bool:
        return bool_
    try:
        return from_numpy_dtype(np.dtype(spec))
    except TypeError:
        raise DTypeError(f"cannot interpret {spec!r} as a dtype") from None


def np_dtype(spec):
    """NumPy dtype for any dtype spec, None passes through."""
    return None if spec is None else to_dtype(spec).np_dtype
