"""Elementwise ops. Inputs may broadcast; the engine sums gradients back to each input's shape."""
import math

from ..autograd.function import Function


class Add(Function):
    @staticmethod
    def forward(ctx, a, b):
        return a + b

    @staticmethod
    def backward(ctx, grad):
        return grad, grad


class Sub(Function):
    @staticmethod
    def forward(ctx, a, b):
        return a - b

    @staticmethod
    def backward(ctx, grad):
        return grad, (-grad if ctx.needs_input_grad[1] else None)


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


class Div(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a / b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        ga = grad / b if ctx.needs_input_grad[0] else None
        gb = -grad * a / (b * b) if ctx.needs_input_grad[1] else None
        return ga, gb


class Neg(Function):
    @staticmethod
    def forward(ctx, a):
        return -a

    @staticmethod
    def backward(ctx, grad):
        return -grad


class Pow(Function):
    """a ** b for a tensor or scalar base and exponent."""

    @staticmethod
    def forward(ctx, a, b):
        out = a ** b
        ctx.save_for_backward(a, b, out)
        return out

    @staticmethod
    def backward(ctx, grad):
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


class Log(Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return ctx.xp.log(a)

    @staticmethod
    def backward(ctx, grad):
        a, = ctx.saved_tensors
        return grad / a


class Sqrt(Function):
    @staticmethod
    def forward(ctx, a):
        out = ctx.xp.sqrt(a)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        out, = ctx.saved_tensors
        return grad / (2 * out)


class Abs(Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return ctx.xp.abs(a)

    @staticmethod
    def backward(ctx, grad):
        a, = ctx.saved_tensors
        return grad * ctx.xp.sign(a)


class Sin(Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return ctx.xp.sin(a)

    @staticmethod
    def backward(ctx, grad):
        a, = ctx.saved_tensors
        return grad * ctx.xp.cos(a)


class Cos(Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return ctx.xp.cos(a)

    @staticmethod
    def backward(ctx, grad):
        a, = ctx.saved_tensors
        return -grad * ctx.xp.sin(a)


class Clamp(Function):
    """Gradient flows to ``a`` where min <= a <= max (PyTorch's convention at the boundaries); tensor
    bounds get the gradient where they were the value chosen (clamp = minimum(maximum(a, lo), hi))."""

    @staticmethod
    def forward(ctx, a, lo, hi):
        ctx.save_for_backward(a)
        ctx.bounds = (lo, hi)
        return ctx.xp.clip(a, lo, hi)

    @staticmethod
    def backward(ctx, grad):
        a, = ctx.saved_tensors
        lo, hi = ctx.bounds
        above_lo = True if lo is None else a >= lo
        below_hi = True if hi is None else (a if lo is None else ctx.xp.maximum(a, lo)) <= hi
        _, need_lo, need_hi = ctx.needs_input_grad
        return (grad * (above_lo & below_hi), grad * (~above_lo & below_hi) if need_lo else None,
                grad * ~below_hi if need_hi else None)


def _pick_backward(ctx, grad, first_wins):
    """Gradient of maximum/minimum: to the input that was picked; ties split it equally (as PyTorch)."""
    a, b = ctx.saved_tensors
    share = first_wins(a, b) + (a == b) * 0.5
    return grad * share.astype(grad.dtype), grad * (1 - share).astype(grad.dtype)


class Maximum(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return ctx.xp.maximum(a, b)

    @staticmethod
    def backward(ctx, grad):
        return _pick_backward(ctx, grad, lambda a, b: a > b)


class Minimum(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return ctx.xp.minimum(a, b)

    @staticmethod
    def backward(ctx, grad):
        return _pick_backward(ctx, grad, lambda a, b: a < b)


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


class Cast(Function):
    """Change dtype; the gradient is cast back to the input's dtype."""
    exact_dtype = True

    @staticmethod
    def forward(ctx, a, np_dtype):
        ctx.in_dtype = a.dtype
        return a.astype(np_dtype)

    @staticmethod
    def backward(ctx, grad):
        return grad.astype(ctx.in_dtype), None


class Clone(Function):
    @staticmethod
    def forward(ctx, a):
        return a.copy()

    @staticmethod
    def backward(ctx, grad):
        return grad
