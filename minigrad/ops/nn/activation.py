"""Activations, softmax/log_softmax and dropout: one Function each, its public function right under it.

Constants are Python floats so float32 inputs stay float32 (a NumPy float64 scalar would upcast).
"""
import math
import warnings

from ...autograd.extensions import outside_apply
from ...autograd.function import Function
from ...errors import ArgumentError, ShapeError
from ...random import host_rng
from .._args import norm_dim, quiet, wrap
from ._util import erf
from .._rules import const
from ..elementwise import where

_SQRT_2 = math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_C = 0.044715


class ReLU(Function):
    name = "relu"

    @staticmethod
    def forward(ctx, x):
        out = ctx.xp.maximum(x, 0, out=ctx.empty_like(x.shape, x.dtype, x))   # x's memory layout
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        out, = ctx.saved_tensors
        return ctx.xp.multiply(grad, out > 0, out=ctx.empty_like(grad.shape, grad.dtype, grad))

    @staticmethod
    def vjp(ctx, grad):
        out, = ctx.saved_tensors
        return where(out > 0, grad, 0.0)

    @staticmethod
    def jvp(primals, tangents, out):
        return where(out > 0, tangents[0], 0.0)


def relu(input, inplace=False):
    """max(x, 0). ``inplace`` is accepted for PyTorch compatibility; the result is always a new tensor."""
    return ReLU.apply(input)


class LeakyReLU(Function):
    name = "leaky_relu"

    @staticmethod
    def forward(ctx, x, *, negative_slope):
        ctx.slope = negative_slope
        ctx.save_for_backward(x)
        return ctx.xp.where(x > 0, x, x * negative_slope)

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        return ctx.xp.where(x > 0, grad, grad * ctx.slope)

    @staticmethod
    def vjp(ctx, grad):
        x, = ctx.saved_tensors
        return where(x > 0, grad, grad * ctx.slope)

    @staticmethod
    def jvp(primals, tangents, out, negative_slope):
        return where(primals[0] > 0, tangents[0], tangents[0] * negative_slope)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return LeakyReLU.apply(input, negative_slope=float(negative_slope))


class GELU(Function):
    """Exact: x Phi(x) with Phi(x) = (1 + erf(x / sqrt 2)) / 2; 'tanh': the tanh approximation.

    On CPU, forward saves the *derivative* instead of x: it shares most of its work with the forward
    (erf's Gaussian, tanh), backward becomes one multiply, and x (often a wide MLP activation) need not
    stay alive for backward."""
    name = "gelu"

    @staticmethod
    def forward(ctx, x, *, approximate):
        xp = ctx.xp
        ctx.approximate = approximate
        if ctx.fused is not None:  # GPU: one fused kernel each way (backend/cuda_kernels.py)
            ctx.save_for_backward(x)
            return ctx.fused.gelu(x, approximate)
        need_grad = ctx.needs_input_grad[0]       # no derivative to prepare under no_grad (eval, sampling)
        # the passes below work in place (out=, +=): on a 0-d array NumPy would hand back scalars
        out, deriv = _gelu_cpu(xp, x.reshape(1) if x.ndim == 0 else x, approximate, need_grad)
        if need_grad:
            ctx.save_for_backward(deriv.reshape(x.shape), x)   # x: for the second derivative (vjp)
        return out.reshape(x.shape)

    @staticmethod
    def backward(ctx, grad):
        if ctx.fused is not None:
            x, = ctx.saved_tensors
            return ctx.fused.gelu_backward(x, grad, ctx.approximate)
        deriv, _ = ctx.saved_tensors
        return grad * deriv

    @staticmethod
    def vjp(ctx, grad):
        x = ctx.saved_tensors[-1]
        return grad * _gelu_derivative(x, ctx.approximate)

    @staticmethod
    def jvp(primals, tangents, out, approximate):
        return tangents[0] * _gelu_derivative(primals[0], approximate)


class Erf(Function):
    """erf as an op, so that GELU's derivative (the normal CDF) is differentiable again."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return erf(ctx.xp, x)

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        return grad * (2.0 / math.sqrt(math.pi)) * ctx.xp.exp(-x * x)

    @staticmethod
    def vjp(ctx, grad):
        x, = ctx.saved_tensors
        return grad * (2.0 / math.sqrt(math.pi)) * (-x * x).exp()

    @staticmethod
    def jvp(primals, tangents, out):
        x = primals[0]
        return tangents[0] * (2.0 / math.sqrt(math.pi)) * (-x * x).exp()


def _gelu_derivative(x, approximate):
    """d gelu / dx in minigrad ops (differentiable again: for higher order and forward mode)."""
    if approximate == "tanh":
        half = ((x + x * x * x * _GELU_C) * _SQRT_2_OVER_PI).tanh() * 0.5 + 0.5
        return half + x * half * (1.0 - half) * (2.0 * _SQRT_2_OVER_PI) * (1.0 + x * x * (3.0 * _GELU_C))
    cdf = (Erf.apply(x * (1.0 / _SQRT_2)) + 1.0) * 0.5
    return cdf + x * (x * x * -0.5).exp() * _INV_SQRT_2PI


def _gelu_cpu(xp, x, approximate, need_grad):
    """GELU on the CPU: ``(out, derivative)`` (the derivative None unless ``need_grad``)."""
    if approximate == "tanh":   # t = tanh(sqrt(2/pi) (x + c x^3)), out = x (1 + t) / 2
        x2 = x * x
        u = x2 * _GELU_C
        u += 1.0
        u *= x
        u *= _SQRT_2_OVER_PI
        half = xp.tanh(u, out=u)
        half += 1.0
        half *= 0.5                                 # (1 + t) / 2
        out = x * half
        if need_grad:
            # d/dx = (1 + t)/2 + x/2 (1 - t^2) sqrt(2/pi) (1 + 3c x^2), and (1 - t^2)/2 = 2 half (1 - half)
            deriv = 1.0 - half
            deriv *= half
            deriv *= 2.0 * _SQRT_2_OVER_PI
            deriv *= x
            x2 *= 3.0 * _GELU_C
            x2 += 1.0
            deriv *= x2
            deriv += half
            return out, deriv
        return out, None
    if need_grad:
        cdf, gauss = erf(xp, x / _SQRT_2, gauss=True)   # gauss = exp(-x^2 / 2)
    else:
        cdf = erf(xp, x / _SQRT_2)
    cdf += 1.0
    cdf *= 0.5
    out = x * cdf
    if need_grad:
        deriv = gauss                               # d/dx = Phi(x) + x phi(x), in place
        deriv *= x
        deriv *= _INV_SQRT_2PI
        deriv += cdf
        return out, deriv
    return out, None


def gelu(input, approximate="none"):
    """x * Phi(x) with the exact normal CDF (erf), or the tanh approximation with approximate='tanh'."""
    if approximate not in ("none", "tanh"):
        raise ArgumentError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return GELU.apply(input, approximate=approximate)


def stable_sigmoid(xp, x):
    """1 / (1 + exp(-x)) without overflow: exp only ever sees -|x|."""
    e = xp.exp(-xp.abs(x))
    return xp.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


class Sigmoid(Function):
    name = "sigmoid"

    @staticmethod
    def forward(ctx, x):
        out = stable_sigmoid(ctx.xp, x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        s, = ctx.saved_tensors
        return grad * s * (1.0 - s)

    vjp = backward

    @staticmethod
    def jvp(primals, tangents, out):
        return tangents[0] * out * (1.0 - out)


def sigmoid(input):
    return Sigmoid.apply(input)


class Tanh(Function):
    name = "tanh"

    @staticmethod
    def forward(ctx, x):
        out = ctx.xp.tanh(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        t, = ctx.saved_tensors
        return grad * (1.0 - t * t)

    vjp = backward

    @staticmethod
    def jvp(primals, tangents, out):
        return tangents[0] * (1.0 - out * out)


def tanh(input):
    return Tanh.apply(input)


class SiLU(Function):
    name = "silu"

    @staticmethod
    def forward(ctx, x):
        s = stable_sigmoid(ctx.xp, x)
        ctx.save_for_backward(x, s)
        return x * s

    @staticmethod
    def backward(ctx, grad):
        x, s = ctx.saved_tensors  # d/dx x s(x) = s (1 + x (1 - s))
        return grad * (s * (1.0 + x * (1.0 - s)))

    @staticmethod
    def vjp(ctx, grad):
        x, _ = ctx.saved_tensors
        s = sigmoid(x)
        return grad * (s * (1.0 + x * (1.0 - s)))

    @staticmethod
    def jvp(primals, tangents, out):
        x, s = primals[0], sigmoid(primals[0])
        return tangents[0] * (s * (1.0 + x * (1.0 - s)))


def silu(input, inplace=False):
    return SiLU.apply(input)


def _softmax_dim(op, input, dim):
    if dim is None:  # PyTorch's legacy implicit choice
        dim = 0 if input.ndim in (0, 1, 3) else 1
        warnings.warn(f"{op}: implicit dimension choice is deprecated; pass dim= explicitly "
                      f"(using dim={dim})", UserWarning, stacklevel=3)
    dim = norm_dim(dim, input.ndim, op)
    return None if input.ndim == 0 else dim


class Softmax(Function):
    """exp(x - max) / sum: the max subtraction keeps exp from overflowing."""
    name = "softmax"

    @staticmethod
    def forward(ctx, x, *, dim):
        xp = ctx.xp
        ctx.dim = dim
        if ctx.fused is not None:
            e = ctx.fused.softmax(x, dim)
            ctx.save_for_backward(e)
            return e
        with quiet():       # a fully masked row (all -inf) is NaN, silently, as in PyTorch
            e = xp.exp(x - x.max(axis=dim, keepdims=True))
            e /= e.sum(axis=dim, keepdims=True)
        ctx.save_for_backward(e)
        return e

    @staticmethod
    def backward(ctx, grad):
        p, = ctx.saved_tensors  # dx = p (g - sum(g p))
        if ctx.fused is not None:
            return ctx.fused.softmax_backward(p, grad, ctx.dim)
        gp = grad * p
        gp -= p * gp.sum(axis=ctx.dim, keepdims=True)
        return gp

    @staticmethod
    def vjp(ctx, grad):
        p, = ctx.saved_tensors
        return p * (grad - (grad * p).sum(dim=ctx.dim, keepdim=True))

    @staticmethod
    def jvp(primals, tangents, out, dim):
        t = tangents[0]
        return out * (t - (t * out).sum(dim=dim, keepdim=True))


def softmax(input, dim=None, dtype=None):
    """exp(x - max) / sum along ``dim`` (max-subtracted: finite for any finite input)."""
    if dtype is not None:
        input = input.to(dtype)
    return Softmax.apply(input, dim=_softmax_dim("softmax", input, dim))


class LogSoftmax(Function):
    """x - max - log(sum(exp(x - max))): log-sum-exp, finite for any finite input."""
    name = "log_softmax"

    @staticmethod
    def forward(ctx, x, *, dim):
        xp = ctx.xp
        ctx.dim = dim
        if ctx.fused is not None:
            out = ctx.fused.log_softmax(x, dim)
            ctx.save_for_backward(out)
            return out
        with quiet():       # a fully masked row (all -inf) is NaN, silently, as in PyTorch
            shifted = x - x.max(axis=dim, keepdims=True)
            shifted -= xp.log(xp.exp(shifted).sum(axis=dim, keepdims=True))
        ctx.save_for_backward(shifted)
        return shifted

    @staticmethod
    def backward(ctx, grad):
        out, = ctx.saved_tensors  # dx = g - softmax * sum(g)
        if ctx.fused is not None:
            return ctx.fused.log_softmax_backward(out, grad, ctx.dim)
        return grad - ctx.xp.exp(out) * grad.sum(axis=ctx.dim, keepdims=True)

    @staticmethod
    def vjp(ctx, grad):
        out, = ctx.saved_tensors
        return grad - out.exp() * grad.sum(dim=ctx.dim, keepdim=True)

    @staticmethod
    def jvp(primals, tangents, out, dim):
        t = tangents[0]
        return t - (out.exp() * t).sum(dim=dim, keepdim=True)


def log_softmax(input, dim=None, dtype=None):
    """x - logsumexp(x) along ``dim``, computed stably."""
    if dtype is not None:
        input = input.to(dtype)
    return LogSoftmax.apply(input, dim=_softmax_dim("log_softmax", input, dim))


class Dropout(Function):
    """Inverted dropout: keep each element with probability 1 - p and scale kept ones by 1 / (1 - p)."""
    name = "dropout"

    @staticmethod
    def forward(ctx, x, *, p, generator):
        xp = ctx.xp
        if p >= 1.0:
            mask = xp.zeros_like(x)
        else:
            u = host_rng(generator).random(x.shape, dtype="float32" if x.dtype.itemsize <= 4 else "float64")
            keep = xp.asarray(u >= p)
            mask = keep.astype(x.dtype) * (1.0 / (1.0 - p))
        ctx.save_for_backward(mask)
        return x * mask

    @staticmethod
    def backward(ctx, grad):
        mask, = ctx.saved_tensors
        return grad * mask

    @staticmethod
    def vjp(ctx, grad):
        mask, = ctx.saved_tensors
        return grad * mask

    @staticmethod
    def jvp(primals, tangents, out, p, generator):
        keep = out.array != 0  # the mask again from the output (scaled input where kept, 0 where dropped)
        return where(const(out, keep), tangents[0] * (1.0 / (1.0 - p)), 0.0) if p < 1.0 else tangents[0] * 0.0


def check_dropout_p(op, p):
    """``p`` as a float in [0, 1] (F.dropout, nn.Dropout, scaled_dot_product_attention's dropout_p)."""
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ArgumentError(f"{op}: dropout probability has to be between 0 and 1, but got {p!r}")
    return float(p)


def dropout(input, p=0.5, training=True, inplace=False, generator=None):
    """Inverted dropout: zero each element with probability ``p``, scale the rest by 1 / (1 - p).

    Identity (the input itself) when ``training`` is False or ``p`` is 0. ``generator``: an
    ``mg.Generator`` (default: the global one seeded by ``mg.manual_seed``).
    """
    p = check_dropout_p("dropout", p)
    if not training or p == 0.0:
        return input
    return Dropout.apply(input, p=p, generator=generator)


def _feature_dropout(input, p, training, batched, generator=None):
    """Channel-wise dropout: one draw per (sample, channel) -- dims 0 and 1 of a batched input, dim 0 of
    an unbatched one -- broadcast over the rest, kept ones scaled by 1 / (1 - p). The mask is ``Dropout``
    of a ones array (its draws from the same generator), so the gradient is input's times the mask."""
    if not training or p == 0.0:
        return input
    lead = tuple(input.shape[:2] if batched else input.shape[:1])
    ones = wrap(input.device.xp.ones(lead, dtype=input.array.dtype), input.device)
    mask = Dropout.apply(ones, p=p, generator=generator)
    return input * mask.reshape(lead + (1,) * (input.ndim - len(lead)))


@outside_apply
def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, L) or unbatched (C, L) inputs."""
    p = check_dropout_p("dropout1d", p)
    if input.ndim not in (2, 3):
        raise ShapeError(f"dropout1d: expected a 2-D or 3-D input, got shape {tuple(input.shape)}")
    return _feature_dropout(input, p, training, input.ndim == 3)


@outside_apply
def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, H, W) inputs. Like PyTorch, dims 0 and 1 are (N, C) whatever the
    number of dims (a 3-D input gets 1-D channel dropout, with PyTorch's warning)."""
    p = check_dropout_p("dropout2d", p)
    if input.ndim not in (3, 4):
        warnings.warn(f"dropout2d: received a {input.ndim}-D input; dropout2d exists for 3-D or 4-D inputs "
                      f"(channel-wise dropout over 2 spatial dims); use dropout1d or dropout", UserWarning,
                      stacklevel=2)
    elif input.ndim == 3:
        warnings.warn("dropout2d: received a 3-D input and assuming that channel-wise 1-D dropout is "
                      "desired (input read as (N, C, L)), as PyTorch does; use dropout1d to say so", UserWarning,
                      stacklevel=2)
    return _feature_dropout(input, p, training, True)


@outside_apply
def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, D, H, W) or unbatched (C, D, H, W) inputs."""
    p = check_dropout_p("dropout3d", p)
    if input.ndim not in (4, 5):
        warnings.warn(f"dropout3d: received a {input.ndim}-D input; it expects 4-D or 5-D inputs", UserWarning,
                      stacklevel=2)
    return _feature_dropout(input, p, training, input.ndim != 4)
class ActivationMethods:
    """Tensor's activation methods (``x.relu()``, ``x.softmax(-1)``): a mixin of ``Tensor``."""
    __slots__ = ()
    relu, sigmoid, tanh, gelu, silu, softmax, log_softmax = relu, sigmoid, tanh, gelu, silu, softmax, log_softmax
