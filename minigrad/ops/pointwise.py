"""More pointwise maths PyTorch programs use (elementwise.py holds the arithmetic and the first unary ops):
erf / erfc, atan2, lerp. erf is the op GELU's derivative already uses (``ops/nn/activation.py: Erf``)."""
from ..autograd.function import Function
from ..backend import dtypes
from ..errors import ArgumentError
from ..tensor_base import TensorBase as Tensor  # every Tensor is one (tensor.py imports ops)
from ._args import operand, quiet
from ._rules import tsum
from .elementwise import _default_float, _unary, cast
from .nn.activation import Erf

_erf = _unary(Erf)


def erf(input):
    """Elementwise erf (differentiable); an integer tensor gives the default float dtype."""
    return _erf(input if input.array.dtype.kind in "fV" else cast(input, dtypes.default_float))


def erfc(input):
    """1 - erf(input). Composed, so its absolute error is erf's: for input > ~4 (erfc < 1e-8) it is 0 in
    float32 where PyTorch's own kernel keeps the tiny relative value."""
    return 1.0 - erf(input)


class Atan2(Function):
    """atan2(a, b): the angle of the point (b, a); d/da = b / (a^2 + b^2), d/db = -a / (a^2 + b^2)."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return ctx.xp.arctan2(a, b)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        with quiet():            # at (0, 0) the gradient is nan, as in PyTorch
            r = grad / (a * a + b * b)
        return (r * b if ctx.needs_input_grad[0] else None), (-r * a if ctx.needs_input_grad[1] else None)

    @staticmethod
    def vjp(ctx, grad):
        a, b = ctx.saved_tensors
        r = grad / (a * a + b * b)
        return (r * b if ctx.needs_input_grad[0] else None), (-r * a if ctx.needs_input_grad[1] else None)

    @staticmethod
    def jvp(primals, tangents, out):
        (a, b), (ta, tb) = primals, tangents
        return tsum(None if ta is None else ta * b, None if tb is None else -tb * a) / (a * a + b * b)


def atan2(input, other):
    """The elementwise angle of (other, input) in radians, in [-pi, pi] (broadcasting)."""
    if not isinstance(input, Tensor):
        raise ArgumentError(f"atan2: input must be a Tensor, got {type(input).__name__}")
    other = operand(other, input)
    out = Atan2.apply(input, other)
    return out if out.array.dtype.char != "d" else _default_float(out, input, other)


arctan2 = atan2


def lerp(input, end, weight):
    """input + weight * (end - input), for a scalar or tensor ``weight`` (broadcasting)."""
    if not isinstance(weight, (Tensor, int, float)) or isinstance(weight, bool):
        raise ArgumentError(f"lerp: weight must be a number or a Tensor, got {type(weight).__name__}")
    return input + weight * (end - input)


class PointwiseMethods:
    """Tensor's methods of the ops above: a mixin of ``Tensor``."""
    __slots__ = ()
    erf, erfc, atan2, arctan2, lerp = erf, erfc, atan2, atan2, lerp
