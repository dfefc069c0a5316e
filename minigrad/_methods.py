"""Bind the op library onto Tensor as methods (``x.sum(dim=1)``, ``x.reshape(2, -1)``, ``x.relu()``).

Everything bound here comes from the core (``minigrad.ops`` and ``minigrad.ops.nn``), never from the
``nn`` feature layer.
"""
from . import ops
from .ops.nn import activation
from .tensor import Tensor

_SAME_NAME = """add sub mul div neg pow exp log sqrt abs sin cos square rsqrt clamp clip maximum minimum sum mean
var std max min amax amin argmax argmin logsumexp prod cumsum norm matmul mm bmm reshape view transpose
swapaxes permute expand expand_as broadcast_to squeeze unsqueeze flatten unflatten split chunk narrow repeat
tril triu flip masked_fill gather isnan isinf isfinite sign all any logical_not logical_and logical_or
eq ne lt le gt ge""".split()

for _name in _SAME_NAME:
    setattr(Tensor, _name, getattr(ops, _name))

for _name in ("relu", "sigmoid", "tanh", "softmax", "log_softmax", "gelu", "silu"):
    setattr(Tensor, _name, getattr(activation, _name))

Tensor.divide = Tensor.true_divide = ops.div
Tensor.negative = ops.neg
Tensor.t = ops.t
Tensor.T = property(lambda self: ops.permute(self, *reversed(range(self.ndim))) if self.ndim > 1 else self)
Tensor.mT = property(lambda self: ops.transpose(self, -2, -1))
Tensor.where = lambda self, condition, other: ops.where(condition, self, other)
