"""Ops that pick between values: clamp, maximum/minimum, where. Their gradients go where the value was picked
from (ties split as PyTorch does), so beyond first order the picks are constants (masks)."""
from ..autograd.extensions import outside_apply
from ..autograd.function import Function
from ..errors import ArgumentError, DTypeError
from ..tensor_base import TensorBase as Tensor  # every Tensor is one (tensor.py imports ops)
from ._args import NUMBER, as_tensor_like, operand, wrap
from ._rules import const, tsum


class Clamp(Function):
    """Gradient flows to ``a`` where min <= a <= max (PyTorch's convention at the boundaries); tensor
    bounds get the gradient where they were the value chosen (clamp = minimum(maximum(a, lo), hi))."""

    @staticmethod
    def forward(ctx, a, lo, hi):
        ctx.save_for_backward(a)
        ctx.lo, ctx.hi = lo, hi
        return ctx.xp.clip(a, lo, hi)

    @staticmethod
    def backward(ctx, grad):
        above_lo, below_hi = _clamp_masks(ctx.xp, ctx.saved_tensors[0], ctx.lo, ctx.hi)
        _, need_lo, need_hi = ctx.needs_input_grad
        return (grad * (above_lo & below_hi), grad * (~above_lo & below_hi) if need_lo else None,
                grad * ~below_hi if need_hi else None)

    @staticmethod
    def vjp(ctx, grad):
        above_lo, below_hi = _clamp_masks(ctx.xp, ctx.node.saved_tensors[0], ctx.lo, ctx.hi)
        _, need_lo, need_hi = ctx.needs_input_grad
        pick = lambda mask: where(const(ctx, mask), grad, 0.0)  # noqa: E731
        return (pick(above_lo & below_hi), pick(~above_lo & below_hi) if need_lo else None,
                pick(~below_hi) if need_hi else None)

    @staticmethod
    def jvp(primals, tangents, out):
        (a, lo, hi), (ta, tlo, thi) = primals, tangents
        xp = a.device.xp
        above_lo, below_hi = _clamp_masks(xp, a.array, _raw(lo), _raw(hi))
        pick = lambda mask, t: None if t is None else where(const(a, mask), t, 0.0)  # noqa
        return tsum(pick(above_lo & below_hi, ta), pick(~above_lo & below_hi, tlo), pick(~below_hi, thi))


def _clamp_masks(xp, a, lo, hi):
    """Where ``a`` (an array) is >= lo, and where the lower-clamped value is <= hi (PyTorch's ties)."""
    above_lo = xp.ones(a.shape, bool) if lo is None else a >= lo
    below_hi = xp.ones(a.shape, bool) if hi is None else (a if lo is None else xp.maximum(a, lo)) <= hi
    return above_lo, below_hi


def _raw(x):
    return x.array if isinstance(x, Tensor) else x


def clamp(a, min=None, max=None):
    """Bounds are numbers or tensors (differentiable); at least one must be given."""
    if min is None and max is None:
        raise ArgumentError("clamp: at least one of min and max must be given")
    lo = min if min is None or isinstance(min, NUMBER) else operand(min, a)
    hi = max if max is None or isinstance(max, NUMBER) else operand(max, a)
    return Clamp.apply(a, lo, hi)


clip = clamp


class _Pick(Function):
    """maximum/minimum: the gradient goes to the input that was picked; ties split it equally (as PyTorch).
    ``first_wins(a, b)``: where the first input is the one picked; ``ufunc``: the array module's function."""
    first_wins = ufunc = None

    @classmethod
    def forward(cls, ctx, a, b):
        ctx.save_for_backward(a, b)
        return getattr(ctx.xp, cls.ufunc)(a, b)

    @staticmethod
    def backward(ctx, grad):
        share = ctx.share(*ctx.saved_tensors)
        return grad * share.astype(grad.dtype), grad * (1 - share).astype(grad.dtype)

    @staticmethod
    def vjp(ctx, grad):
        share = const(ctx, ctx.share(*ctx.node.saved_tensors).astype(grad.array.dtype))
        return grad * share, grad * (1 - share)

    @classmethod
    def jvp(cls, primals, tangents, out):
        (a, b), (ta, tb) = primals, tangents
        share = const(a, cls.share(_raw(a), _raw(b)).astype(a.array.dtype))
        return tsum(None if ta is None else ta * share, None if tb is None else tb * (1 - share))

    @classmethod
    def share(cls, a, b):
        return cls.first_wins(a, b) + (a == b) * 0.5


class Maximum(_Pick):
    first_wins, ufunc = staticmethod(lambda a, b: a > b), "maximum"


def maximum(a, b):
    return Maximum.apply(a, operand(b, a))


class Minimum(_Pick):
    first_wins, ufunc = staticmethod(lambda a, b: a < b), "minimum"


def minimum(a, b):
    return Minimum.apply(a, operand(b, a))


class Where(Function):
    @staticmethod
    def forward(ctx, cond, a, b):
        ctx.save_for_backward(cond)
        return ctx.xp.where(cond, a, b)

    @staticmethod
    def backward(ctx, grad):
        cond, = ctx.saved_tensors
        _, need_a, need_b = ctx.needs_input_grad
        zero = grad.dtype.type(0)
        return (None, ctx.xp.where(cond, grad, zero) if need_a else None,
                ctx.xp.where(cond, zero, grad) if need_b else None)

    @staticmethod
    def vjp(ctx, grad):
        cond, = ctx.saved_tensors
        _, need_a, need_b = ctx.needs_input_grad
        return None, where(cond, grad, 0.0) if need_a else None, where(cond, 0.0, grad) if need_b else None

    @staticmethod
    def jvp(primals, tangents, out):
        cond, a, b = primals
        _, ta, tb = tangents
        zero = 0.0
        return tsum(None if ta is None else where(cond, ta, zero), None if tb is None else where(cond, zero, tb))


@outside_apply
def where(condition, a, b):
    """``a`` where ``condition`` (a bool tensor) holds, else ``b``; numbers broadcast."""
    ref = next((x for x in (a, b, condition) if isinstance(x, Tensor)), None)
    if ref is None:
        raise ArgumentError("where: at least one argument must be a Tensor")
    cond = condition if isinstance(condition, Tensor) else as_tensor_like(condition, ref)
    if cond.array.dtype.kind != "b":
        raise DTypeError(f"where: condition must be a bool tensor, got {cond.dtype}")
    a = operand(a, ref)
    b = operand(b, ref)
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        return wrap(cond.device.xp.where(cond.array, a, b), cond.device)
    return Where.apply(cond, a, b)
