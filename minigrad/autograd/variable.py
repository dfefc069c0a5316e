"""``Variable``: PyTorch's pre-0.4 wrapper, kept (as PyTorch keeps it) for older programs.

``Variable(t, requires_grad=False)`` is ``t.detach()`` with ``requires_grad`` set, and ``isinstance(x,
Variable)`` holds for every tensor: since PyTorch 0.4 a Variable *is* a Tensor.
"""
from . import function


class _VariableMeta(type):
    def __instancecheck__(cls, other):
        return isinstance(other, function.Tensor)


class Variable(metaclass=_VariableMeta):
    def __new__(cls, data, requires_grad=False, volatile=False):
        if not isinstance(data, function.Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        t = data.detach()
        return t.requires_grad_(True) if requires_grad else t
