"""``minigrad.nn.functional``: PyTorch's functional API over the ops in ``minigrad.ops.nn``.

    import minigrad.nn.functional as F
    loss = F.cross_entropy(F.linear(F.relu(x), w, b), target)

Each function here only normalises arguments (ints to tuples, defaults, validation of plain values) and
calls one Function; the maths and its gradient live side by side in ``minigrad/ops/nn/<family>.py``.
"""
import warnings

from ..errors import ArgumentError
from ..ops.nn import activation as _act
from ..ops.nn import attention as _attn
from ..ops.nn import conv as _conv
from ..ops.nn import embedding as _emb
from ..ops.nn import flash_attention as _flash
from ..ops.nn import linear as _lin
from ..ops.nn import loss as _loss
from ..ops.nn import norm as _norm
from ..ops.nn import pool as _pool
from ..ops import one_hot, pad  # noqa: E402,F401  (PyTorch exposes both in nn.functional)
from ..ops.nn._util import check_reduction, normalize_dim

__all__ = [
    "relu", "leaky_relu", "gelu", "sigmoid", "tanh", "silu", "softmax", "log_softmax", "dropout",
    "linear", "conv1d", "conv2d", "max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d",
    "adaptive_avg_pool2d", "layer_norm", "batch_norm", "embedding", "cross_entropy", "nll_loss",
    "mse_loss", "binary_cross_entropy_with_logits", "scaled_dot_product_attention",
]


# --- activations ----------------------------------------------------------------------------------
def relu(input, inplace=False):
    """max(x, 0). ``inplace`` is accepted for PyTorch compatibility; the result is always a new tensor."""
    return _act.ReLU.apply(input)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return _act.LeakyReLU.apply(input, float(negative_slope))


def gelu(input, approximate="none"):
    """x * Phi(x) with the exact normal CDF (erf), or the tanh approximation with approximate='tanh'."""
    if approximate not in ("none", "tanh"):
        raise ArgumentError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return _act.GELU.apply(input, approximate)


def sigmoid(input):
    return _act.Sigmoid.apply(input)


def tanh(input):
    return _act.Tanh.apply(input)


def silu(input, inplace=False):
    return _act.SiLU.apply(input)


def _softmax_dim(op, input, dim):
    if dim is None:  # PyTorch's legacy implicit choice
        dim = 0 if input.ndim in (0, 1, 3) else 1
        warnings.warn(f"{op}: implicit dimension choice is deprecated; pass dim= explicitly "
                      f"(using dim={dim})", UserWarning, stacklevel=3)
    dim = normalize_dim(op, dim, input.ndim)
    return None if input.ndim == 0 else dim


def softmax(input, dim=None, dtype=None):
    """exp(x - max) / sum along ``dim`` (max-subtracted: finite for any finite input)."""
    if dtype is not None:
        input = input.to(dtype)
    return _act.Softmax.apply(input, _softmax_dim("softmax", input, dim))


def log_softmax(input, dim=None, dtype=None):
    """x - logsumexp(x) along ``dim``, computed stably."""
    if dtype is not None:
        input = input.to(dtype)
    return _act.LogSoftmax.apply(input, _softmax_dim("log_softmax", input, dim))


def dropout(input, p=0.5, training=True, inplace=False, generator=None):
    """Inverted dropout: zero each element with probability ``p``, scale the rest by 1 / (1 - p).

    Identity (the input itself) when ``training`` is False or ``p`` is 0. ``generator``: an
    ``mg.Generator`` (default: the global one seeded by ``mg.manual_seed``).
    """
    p = _act.check_dropout_p("dropout", p)
    if not training or p == 0.0:
        return input
    return _act.Dropout.apply(input, p, generator)


# --- linear and convolution -----------------------------------------------------------------------
def linear(input, weight, bias=None):
    """y = x @ weight.T + bias, weight of shape (out_features, in_features); any leading dims."""
    return _lin.Linear.apply(input, weight, bias)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution (cross-correlation, as PyTorch): input (N, C, L), weight (O, C/groups, k).

    padding: int, tuple, 'valid' or 'same' (stride 1 only)."""
    return _conv.conv_nd(_conv.Conv1d, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution: input (N, C, H, W), weight (O, C/groups, kh, kw); im2col + one GEMM per group."""
    return _conv.conv_nd(_conv.Conv2d, input, weight, bias, stride, padding, dilation, groups)


# --- pooling --------------------------------------------------------------------------------------
def _max_pool(cls, nd, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    kernel, stride, pads, dil = _pool.pool_args(cls.name, nd, kernel_size, stride, padding, dilation)
    sink = [] if return_indices else None
    out = cls.apply(input, kernel, stride, pads, dil, bool(ceil_mode), sink)
    if not return_indices:
        return out
    from ..backend.device import get_backend
    from ..tensor import Tensor
    be = get_backend(input.device)
    indices = sink[0] if be.allocator is None else be.adopt(sink[0])
    return out, Tensor._make(indices, input.device)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    return _max_pool(_pool.MaxPool1d, 1, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """Max over (possibly overlapping) windows; stride defaults to kernel_size; padding counts as -inf.

    With return_indices=True also returns int64 indices into each flattened input plane (as PyTorch)."""
    return _max_pool(_pool.MaxPool2d, 2, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


def _avg_pool(cls, nd, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    kernel, stride, pads, _ = _pool.pool_args(cls.name, nd, kernel_size, stride, padding)
    if divisor_override is not None and (isinstance(divisor_override, bool) or
                                         not isinstance(divisor_override, int) or divisor_override == 0):
        raise ArgumentError(f"{cls.name}: divisor_override must be a non-zero int, got {divisor_override!r}")
    return cls.apply(input, kernel, stride, pads, bool(ceil_mode), bool(count_include_pad), divisor_override)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    return _avg_pool(_pool.AvgPool1d, 1, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     None)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """Mean over windows; padded zeros count in the divisor unless count_include_pad=False."""
    return _avg_pool(_pool.AvgPool2d, 2, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


def adaptive_avg_pool2d(input, output_size):
    """Average-pool (N, C, H, W) to ``output_size`` (int, pair, None keeps a dim); any sizes, PyTorch's bins."""
    return _pool.AdaptiveAvgPool2d.apply(input, _pool.adaptive_size("adaptive_avg_pool2d", output_size))


# --- normalisation --------------------------------------------------------------------------------
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalise over the trailing ``normalized_shape`` dims (biased variance), then * weight + bias."""
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    return _norm.LayerNorm.apply(input, tuple(normalized_shape), weight, bias, float(eps))


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1,
               eps=1e-5):
    """Per-channel normalisation of (N, C) or (N, C, *) inputs.

    training=True: batch statistics (biased variance) normalise, and running_mean/running_var (if given)
    are updated in place: r = (1 - momentum) r + momentum * batch_stat, with the unbiased variance.
    training=False: the running statistics normalise.
    """
    if momentum is None or isinstance(momentum, bool) or not isinstance(momentum, (int, float)):
        raise ArgumentError(f"batch_norm: momentum must be a float, got {momentum!r}")
    out = _norm.BatchNorm.apply(input, running_mean, running_var, weight, bias, bool(training),
                                float(momentum), float(eps))
    if training:  # the buffers changed in place: bump their version counters as any in-place op does
        for buf in (running_mean, running_var):
            if buf is not None:
                buf._vc[0] += 1
    return out


# --- embedding ------------------------------------------------------------------------------------
def embedding(input, weight, padding_idx=None):
    """Rows of ``weight`` (num_embeddings, dim) at integer ``input``; the padding_idx row gets no gradient."""
    if padding_idx is not None:
        n = weight.shape[0]
        if isinstance(padding_idx, bool) or not isinstance(padding_idx, int) or not -n <= padding_idx < n:
            raise ArgumentError(f"embedding: padding_idx must be an int within num_embeddings ({n}), "
                                f"got {padding_idx!r}")
        padding_idx %= n
    return _emb.Embedding.apply(input, weight, padding_idx)


# --- losses ---------------------------------------------------------------------------------------
def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """Fused, stable log_softmax + negative log-likelihood over dim 1 of logits (N, C, d1, ...).

    target: class indices (N, d1, ...) (integer) or class probabilities with the logits' shape (float).
    'mean' divides by the summed weight of the non-ignored targets (by the number of samples for
    probability targets). label_smoothing eps mixes the target with the uniform distribution over C classes.
    """
    check_reduction("cross_entropy", reduction)
    if isinstance(label_smoothing, bool) or not isinstance(label_smoothing, (int, float)) \
            or not 0.0 <= label_smoothing <= 1.0:
        raise ArgumentError(f"cross_entropy: label_smoothing must be between 0.0 and 1.0, got "
                            f"{label_smoothing!r}")
    return _loss.CrossEntropy.apply(input, target, weight, int(ignore_index), reduction, float(label_smoothing))


def nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):
    """Negative log-likelihood of log-probabilities (N, C, d1, ...) at class indices (N, d1, ...)."""
    check_reduction("nll_loss", reduction)
    return _loss.NllLoss.apply(input, target, weight, int(ignore_index), reduction)


def mse_loss(input, target, reduction="mean"):
    check_reduction("mse_loss", reduction)
    return _loss.MseLoss.apply(input, target, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, reduction="mean", pos_weight=None):
    """Sigmoid + binary cross-entropy in the stable form (finite for huge logits).

    loss = weight * [(1 - t) x + (1 + (pos_weight - 1) t) * softplus(-x)]."""
    check_reduction("binary_cross_entropy_with_logits", reduction)
    return _loss.BinaryCrossEntropyWithLogits.apply(input, target, weight, pos_weight, reduction)


# --- attention ------------------------------------------------------------------------------------
FLASH_MIN_SCORES = 1024 * 1024   # from this many scores per head (L * S) on, attention is tiled


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None, generator=None, use_flash=None):
    """softmax(q @ k^T * scale + mask) @ v with q (..., L, E), k (..., S, E), v (..., S, Ev).

    attn_mask: bool (True = attend, as PyTorch) or float (added to the scores), broadcast to (..., L, S).
    is_causal: keep only j <= i (top-left aligned). scale defaults to 1/sqrt(E).
    Unlike PyTorch (NaN), a fully masked row outputs zeros and passes no gradient.
    dropout_p applies dropout to the attention weights (whenever > 0, as PyTorch's functional form).
    use_flash: the tiled O(L) path (ops/nn/flash_attention.py); None: when L * S >= FLASH_MIN_SCORES.
    """
    p = _act.check_dropout_p("scaled_dot_product_attention", dropout_p)
    if p == 0 and (use_flash or use_flash is None and query.shape[-2] * key.shape[-2] >= FLASH_MIN_SCORES):
        return _flash.flash_attention(query, key, value, attn_mask, is_causal, scale)
    return _attn.ScaledDotProductAttention.apply(query, key, value, attn_mask, p, bool(is_causal), scale,
                                                 generator)
