"""``mg.nn.init``: fill tensors in place with PyTorch's initialisation schemes.

Every function runs under ``no_grad`` (so it works on parameters), draws from ``generator`` (an
``mg.Generator``; default the global one seeded by ``mg.manual_seed``) and returns the tensor.

Fans: for a weight of shape (out, in, *kernel), ``fan_in = in * prod(kernel)``, ``fan_out = out * prod(kernel)``.

========================  =========================================================================
xavier_uniform_           U(-b, b),  b = gain * sqrt(6 / (fan_in + fan_out))
xavier_normal_            N(0, std), std = gain * sqrt(2 / (fan_in + fan_out))
kaiming_uniform_          U(-b, b),  b = gain * sqrt(3 / fan),  gain = calculate_gain(nonlinearity, a)
kaiming_normal_           N(0, std), std = gain / sqrt(fan)
========================  =========================================================================

Linear and Conv layers use ``kaiming_uniform_(w, a=sqrt(5))``, i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
and the same bound for their bias, exactly as PyTorch's ``reset_parameters``.
"""
import math

import numpy as np

from ..autograd.grad_mode import no_grad
from ..backend.device import get_backend
from ..errors import ArgumentError, ShapeError
from ..random import host_rng

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "zeros_", "ones_", "eye_",
           "dirac_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
           "orthogonal_"]


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity (PyTorch's table).

    linear, conv*, sigmoid: 1; tanh: 5/3; relu: sqrt(2); leaky_relu: sqrt(2 / (1 + slope^2)) (slope
    ``param``, default 0.01); selu: 3/4.
    """
    linear_fns = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                  "conv_transpose3d")
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ArgumentError(f"calculate_gain: negative_slope {param!r} is not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ArgumentError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def _calculate_fan_in_and_fan_out(tensor):
    if tensor.ndim < 2:
        raise ShapeError(f"Fan in and fan out can not be computed for a tensor with fewer than 2 dimensions "
                         f"(shape {tuple(tensor.shape)})")
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ArgumentError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _write(tensor, host):
    """Store host values into the tensor (cast to its dtype, on its device); bump its version."""
    with no_grad():
        be = get_backend(tensor.device)
        tensor.array[...] = be.asarray(np.asarray(host).astype(tensor.array.dtype, copy=False))
        tensor._version_counter.bump()
    return tensor


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fill with U(a, b)."""
    return _write(tensor, host_rng(generator).uniform(a, b, tensor.shape))


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fill with N(mean, std^2)."""
    return _write(tensor, host_rng(generator).normal(mean, std, tensor.shape))


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Fill with N(mean, std^2) truncated to [a, b] (out-of-range draws are redrawn)."""
    if not a < b:
        raise ArgumentError(f"trunc_normal_: need a < b, got a={a}, b={b}")
    rng = host_rng(generator)
    out = rng.normal(mean, std, tensor.shape)
    bad = (out < a) | (out > b)
    for _ in range(1000):
        n = int(bad.sum())
        if n == 0:
            break
        out[bad] = rng.normal(mean, std, n)
        bad = (out < a) | (out > b)
    return _write(tensor, np.clip(out, a, b))


def constant_(tensor, val):
    with no_grad():
        tensor.array[...] = val
        tensor._version_counter.bump()
    return tensor


def zeros_(tensor):
    return constant_(tensor, 0)


def ones_(tensor):
    return constant_(tensor, 1)


def eye_(tensor):
    """Identity matrix into a 2-D tensor."""
    if tensor.ndim != 2:
        raise ShapeError(f"eye_: only 2-D tensors are supported, got shape {tuple(tensor.shape)}")
    return _write(tensor, np.eye(*tensor.shape))


def dirac_(tensor, groups=1):
    """Dirac delta into a {3,4,5}-D conv weight: the convolution preserves the input channels."""
    if tensor.ndim not in (3, 4, 5):
        raise ShapeError(f"dirac_: only 3, 4 or 5-D tensors are supported, got shape {tuple(tensor.shape)}")
    out_per = tensor.shape[0] // groups
    min_dim = min(out_per, tensor.shape[1])
    host = np.zeros(tensor.shape)
    centre = tuple(s // 2 for s in tensor.shape[2:])
    for g in range(groups):
        for d in range(min_dim):
            host[(g * out_per + d, d) + centre] = 1
    return _write(tensor, host)


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """U(-b, b) with b = gain * sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio, 2010)."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = gain * math.sqrt(6.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """U(-b, b) with b = gain * sqrt(3 / fan) (He et al., 2015); ``a``: the leaky_relu slope."""
    if 0 in tensor.shape:
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    bound = math.sqrt(3.0) * calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """N(0, std^2) with std = gain / sqrt(fan)."""
    if 0 in tensor.shape:
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return normal_(tensor, 0.0, std, generator)


def orthogonal_(tensor, gain=1.0, generator=None):
    """A (semi-)orthogonal matrix (rows or columns orthonormal), flattening trailing dims; times ``gain``."""
    if tensor.ndim < 2:
        raise ShapeError(f"orthogonal_: only tensors with 2 or more dimensions are supported, got shape "
                         f"{tuple(tensor.shape)}")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = host_rng(generator).standard_normal((rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q *= np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _write(tensor, gain * q.reshape(tensor.shape))
