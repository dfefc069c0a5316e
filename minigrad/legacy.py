"""PyTorch's legacy typed constructors, still common in older tutorials and programs (``Variable``, their
companion, is ``autograd/variable.py``):

    torch.LongTensor([1, 2, 3]), torch.FloatTensor(2, 3), torch.ByteTensor(...)

``FloatTensor(data)`` is ``tensor(data, dtype=float32)``, ``FloatTensor(2, 3)`` an uninitialised
(2, 3) float32 tensor, and ``isinstance(x, LongTensor)`` checks the dtype (CPU tensors, as PyTorch's
``torch.LongTensor`` names the CPU type). New code should use ``mg.tensor(..., dtype=...)``.
"""
from .backend import dtypes
from .creation import empty
from .tensor import Tensor, tensor


class _TypedMeta(type):
    def __instancecheck__(cls, other):
        return isinstance(other, Tensor) and other.dtype == cls.dtype and other.device.type == "cpu"


def _typed_constructor(name, dtype):
    def __new__(cls, *args, device=None):
        if len(args) == 1 and not isinstance(args[0], int):      # data: a list, an array, a tensor
            return tensor(args[0], dtype=cls.dtype, device=device)
        return empty(*args, dtype=cls.dtype, device=device)      # sizes (none: an empty 1-D tensor)
    doc = f"``{name}(data)`` is ``tensor(data, dtype={dtype.name})``; ``{name}(*sizes)`` uninitialised."
    return _TypedMeta(name, (), {"dtype": dtype, "__new__": __new__, "__doc__": doc})


FloatTensor = _typed_constructor("FloatTensor", dtypes.float32)
DoubleTensor = _typed_constructor("DoubleTensor", dtypes.float64)
HalfTensor = _typed_constructor("HalfTensor", dtypes.float16)
LongTensor = _typed_constructor("LongTensor", dtypes.int64)
IntTensor = _typed_constructor("IntTensor", dtypes.int32)
ShortTensor = _typed_constructor("ShortTensor", dtypes.int16)
CharTensor = _typed_constructor("CharTensor", dtypes.int8)
ByteTensor = _typed_constructor("ByteTensor", dtypes.uint8)
BoolTensor = _typed_constructor("BoolTensor", dtypes.bool_)

__all__ = ["FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor", "ShortTensor",
           "CharTensor", "ByteTensor", "BoolTensor"]
