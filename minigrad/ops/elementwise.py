"""Elementwise ops: arithmetic, unary maths, cast and clone (clamp, maximum/minimum and where: select.py).

Inputs may broadcast; the engine sums gradients back to each input's shape. A Python number is an operand
like a tensor (``Add.apply(t, 2.0)``): NumPy broadcasts it, and backward returns None for it. The public
function under each Function puts a tensor first (``2 - t`` is ``rsub``) and applies the promotion rule
PyTorch has and NumPy lacks: an int tensor with a Python float (or int / int) gives float32, not float64.
"""
import math

from ..autograd.function import Function
from ..backend import dtypes
from ..tensor_base import TensorBase as Tensor  # every Tensor is one (tensor.py imports ops)
from ._args import PY_NUMBERS, operand, quiet
from ._rules import linear_jvp, tsum
from .select import (Clamp, Maximum, Minimum, Where, clamp, clip, maximum, minimum,  # noqa: F401  (re-exported:
                     where)                                      # ops/__init__.py, the fusion table)


def _default_float(out, *inputs):
    """``out`` in the default float dtype when NumPy made it float64 although no input tensor was float64.

    Callers test ``out.array.dtype.char == "d"`` inline before calling: this runs after every arithmetic
    op, the hottest path of the framework, and the test costs less than a call."""
    if any(isinstance(x, Tensor) and x.array.dtype.char == "d" for x in inputs):
        return out
    return cast(out, dtypes.default_float)


def _reflected(Op):
    """``other <op> a`` for a tensor ``a`` and a non-tensor ``other`` (``2 - t`` is ``rsub(t, 2)``)."""
    def fn(a, other):
        out = Op.apply(operand(other, a), a)
        return out if out.array.dtype.char != "d" else _default_float(out, a, other)
    fn.__name__ = fn.__qualname__ = "r" + Op.name
    fn.__doc__ = f"other {Op.name} a, for a tensor ``a``."
    return fn


# --- arithmetic ------------------------------------------------------------------------------------
class Add(Function):
    @staticmethod
    def forward(ctx, a, b):
        return a + b

    @staticmethod
    def backward(ctx, grad):
        return grad, grad

    vjp = backward

    @staticmethod
    def jvp(primals, tangents, out):
        return tsum(*tangents)


def add(a, b, alpha=1):
    """a + alpha * b."""
    if alpha != 1:
        b = mul(b, alpha)
    if not isinstance(a, Tensor):
        a, b = b, a
    out = Add.apply(a, b if isinstance(b, Tensor) or type(b) in PY_NUMBERS else operand(b, a))
    return out if out.array.dtype.char != "d" else _default_float(out, a, b)


class Sub(Function):
    @staticmethod
    def forward(ctx, a, b):
        return a - b

    @staticmethod
    def backward(ctx, grad):
        return grad, (-grad if ctx.needs_input_grad[1] else None)

    vjp = backward

    @staticmethod
    def jvp(primals, tangents, out):
        ta, tb = tangents
        return tsum(ta, None if tb is None else -tb)


def sub(a, b, alpha=1):
    """a - alpha * b."""
    if alpha != 1:
        b = mul(b, alpha)
    if not isinstance(a, Tensor):
        return rsub(b, a)
    out = Sub.apply(a, operand(b, a))
    return out if out.array.dtype.char != "d" else _default_float(out, a, b)


rsub = _reflected(Sub)


class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        need_a, need_b = ctx.needs_input_grad
        return (grad * b if need_a else None), (grad * a if need_b else None)

    vjp = backward

    @staticmethod
    def jvp(primals, tangents, out):
        (a, b), (ta, tb) = primals, tangents
        return tsum(None if ta is None else ta * b, None if tb is None else a * tb)


def mul(a, b):
    if not isinstance(a, Tensor):
        a, b = b, a
    out = Mul.apply(a, b if isinstance(b, Tensor) or type(b) in PY_NUMBERS else operand(b, a))
    return out if out.array.dtype.char != "d" else _default_float(out, a, b)


def square(a):
    return mul(a, a)


class Div(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a / b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        with quiet():    # b = 0 gives inf gradients silently, as in PyTorch (forward already warned)
            ga = grad / b if ctx.needs_input_grad[0] else None
            gb = -grad * a / (b * b) if ctx.needs_input_grad[1] else None
        return ga, gb

    vjp = backward

    @staticmethod
    def jvp(primals, tangents, out):
        (a, b), (ta, tb) = primals, tangents
        return tsum(None if ta is None else ta / b, None if tb is None else -tb * out / b)


def div(a, b):
    if not isinstance(a, Tensor):
        return rdiv(b, a)
    out = Div.apply(a, operand(b, a))
    return out if out.array.dtype.char != "d" else _default_float(out, a, b)


true_divide = divide = div


rdiv = _reflected(Div)


class Neg(Function):
    @staticmethod
    def forward(ctx, a):
        return -a

    @staticmethod
    def backward(ctx, grad):
        return -grad

    vjp = backward
    jvp = linear_jvp(lambda t: -t)


def neg(a):
    return Neg.apply(a)


negative = neg


class Pow(Function):
    """a ** b for a tensor or scalar base and exponent."""

    @staticmethod
    def forward(ctx, a, b):
        if type(b) in PY_NUMBERS and b >= 0 and float(b).is_integer():
            out = a ** b
        else:
            with quiet():   # 0 ** -1 = inf, (-1) ** 0.5 = nan: silent, as in PyTorch
                out = a ** b
        ctx.save_for_backward(a, b, out)
        return out

    @staticmethod
    def backward(ctx, grad):
        with quiet():       # the gradient at a = 0 of a ** 0.5 (norm, std at 0) is inf
            return Pow._backward(ctx, grad)

    @staticmethod
    def _backward(ctx, grad):
        a, b, out = ctx.saved_tensors
        xp = ctx.xp
        ga = gb = None
        if ctx.needs_input_grad[0]:
            if isinstance(b, (int, float)):
                ga = grad * 2 * a if b == 2 else grad * b * a ** (b - 1)
            else:
                ga = grad * b * a ** (b - 1)
        if ctx.needs_input_grad[1]:
            if isinstance(a, (int, float)):  # math.log: a NumPy float64 scalar would upcast float32 grads
                gb = grad * out * (math.log(a) if a > 0 else 0.0)
            else:  # d/db is out * log(a), taken as 0 where a <= 0 (as PyTorch does)
                positive = a > 0
                gb = xp.where(positive, grad * out * xp.log(xp.where(positive, a, 1)), 0)
        return ga, gb

    @staticmethod
    def vjp(ctx, grad):
        a, b, out = ctx.saved_tensors
        return _pow_partials(a, b, out, grad if ctx.needs_input_grad[0] else None,
                             grad if ctx.needs_input_grad[1] else None)

    @staticmethod
    def jvp(primals, tangents, out):
        return tsum(*_pow_partials(*primals, out, *tangents))


def _pow_partials(a, b, out, da, db):
    """d(a ** b) = b a^(b-1) da + a^b log(a) db (the log term 0 where a <= 0, as PyTorch), in Tensor ops."""
    ga = gb = None
    if da is not None:
        ga = da * b * a ** (b - 1) if not (isinstance(b, (int, float)) and b == 2) else da * 2 * a
    if db is not None:
        if isinstance(a, (int, float)):
            gb = db * out * (math.log(a) if a > 0 else 0.0)
        else:
            positive = a > 0
            gb = where(positive, db * out * log(where(positive, a, 1.0)), 0.0)
    return ga, gb


def pow(a, exponent):
    if not isinstance(a, Tensor):
        return rpow(exponent, a)
    out = Pow.apply(a, operand(exponent, a))
    return out if out.array.dtype.char != "d" else _default_float(out, a, exponent)


rpow = _reflected(Pow)


# --- unary maths -----------------------------------------------------------------------------------
def _unary(Op):
    """The public function of a one-input op: ``exp = _unary(Exp)`` (an int tensor gives float32)."""
    def fn(a):
        out = Op.apply(a)
        return out if out.array.dtype.char != "d" else _default_float(out, a)
    fn.__name__ = fn.__qualname__ = Op.name
    fn.__doc__ = f"Elementwise {Op.name} (differentiable)."
    return fn


class Exp(Function):
    @staticmethod
    def forward(ctx, a):
        out = ctx.xp.exp(a)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        out, = ctx.saved_tensors
        return grad * out

    @staticmethod
    def vjp(ctx, grad):
        out, = ctx.saved_tensors
        return grad * out

    @staticmethod
    def jvp(primals, tangents, out):
        ta, = tangents
        return None if ta is None else ta * out


exp = _unary(Exp)


class Log(Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        with quiet():       # log(0) = -inf (masks: log(tril(ones))), log(-1) = nan: silent, as in PyTorch
            return ctx.xp.log(a)

    @staticmethod
    def backward(ctx, grad):
        a, = ctx.saved_tensors
        with quiet():
            return grad / a

    @staticmethod
    def vjp(ctx, grad):
        a, = ctx.saved_tensors
        return grad / a

    @staticmethod
    def jvp(primals, tangents, out):
        (a,), (ta,) = primals, tangents
        return None if ta is None else ta / a


log = _unary(Log)


class Sqrt(Function):
    @staticmethod
    def forward(ctx, a):
        out = ctx.xp.sqrt(a)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        out, = ctx.saved_tensors
        with quiet():       # sqrt's slope at 0 is inf: silent, as in PyTorch
            return grad / (2 * out)

    @staticmethod
    def vjp(ctx, grad):
        out, = ctx.saved_tensors
        return grad / (2 * out)

    @staticmethod
    def jvp(primals, tangents, out):
        ta, = tangents
        return None if ta is None else ta / (2 * out)


sqrt = _unary(Sqrt)


def rsqrt(a):
    """1 / sqrt(a), as a ** -0.5: one op, and rsqrt(0) = inf silently, as in PyTorch."""
    return pow(a, -0.5)


class Abs(Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return ctx.xp.abs(a)

    @staticmethod
    def backward(ctx, grad):
        a, = ctx.saved_tensors
        return grad * ctx.xp.sign(a)

    @staticmethod
    def vjp(ctx, grad):
        a, = ctx.saved_tensors
        return grad * a.sign()

    @staticmethod
    def jvp(primals, tangents, out):
        (a,), (ta,) = primals, tangents
        return None if ta is None else ta * a.sign()


abs = _unary(Abs)


class Sin(Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return ctx.xp.sin(a)

    @staticmethod
    def backward(ctx, grad):
        a, = ctx.saved_tensors
        return grad * ctx.xp.cos(a)

    @staticmethod
    def vjp(ctx, grad):
        a, = ctx.saved_tensors
        return grad * cos(a)

    @staticmethod
    def jvp(primals, tangents, out):
        (a,), (ta,) = primals, tangents
        return None if ta is None else ta * cos(a)


sin = _unary(Sin)


class Cos(Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return ctx.xp.cos(a)

    @staticmethod
    def backward(ctx, grad):
        a, = ctx.saved_tensors
        return -grad * ctx.xp.sin(a)

    @staticmethod
    def vjp(ctx, grad):
        a, = ctx.saved_tensors
        return -grad * sin(a)

    @staticmethod
    def jvp(primals, tangents, out):
        (a,), (ta,) = primals, tangents
        return None if ta is None else -ta * sin(a)


cos = _unary(Cos)


# --- dtype and copies ------------------------------------------------------------------------------
class Cast(Function):
    """Change dtype; the gradient is cast back to the input's dtype."""
    exact_dtype = True

    @staticmethod
    def forward(ctx, a, *, dtype):
        ctx.in_dtype = a.dtype
        return a.astype(dtype)

    @staticmethod
    def backward(ctx, grad):
        return grad.astype(ctx.in_dtype)

    @staticmethod
    def vjp(ctx, grad):
        return cast(grad, ctx.in_dtype)

    @staticmethod
    def jvp(primals, tangents, out, dtype):
        t, = tangents
        return None if t is None or out.array.dtype.kind != "f" else cast(t, dtype)


def cast(a, dtype):
    """``a`` in ``dtype`` (any dtype spec); ``a`` itself when it already has it."""
    dt = dtypes.to_dtype(dtype)
    if dt.np_dtype == a.array.dtype:
        return a
    return Cast.apply(a, dtype=dt.np_dtype)


class Clone(Function):
    @staticmethod
    def forward(ctx, a):
        return a.copy()

    @staticmethod
    def backward(ctx, grad):
        return grad

    vjp = backward
    jvp = linear_jvp(lambda t: t)


def clone(a):
    return Clone.apply(a)


class ElementwiseMethods:
    """Tensor's arithmetic operators and elementwise methods: the functions above (``x + y`` is
    ``add(x, y)``, one call). A mixin of ``Tensor`` (tensor.py), like each op family's."""
    __slots__ = ()
    __add__ = __radd__ = add
    __sub__, __rsub__ = sub, rsub
    __mul__ = __rmul__ = mul
    __truediv__, __rtruediv__ = div, rdiv
    __pow__, __rpow__ = pow, rpow
    __neg__, __abs__ = neg, abs
    add, sub, mul, div, divide, true_divide, neg, negative, pow = add, sub, mul, div, div, div, neg, neg, pow
    exp, log, sqrt, rsqrt, abs, sin, cos, square = exp, log, sqrt, rsqrt, abs, sin, cos, square
    clamp, clip, maximum, minimum, clone = clamp, clamp, maximum, minimum, clone

    def __pos__(self):
        return self

    def where(self, condition, other):
        """``where(condition, self, other)``."""
        return where(condition, self, other)
