"""``minigrad.nn.functional``: PyTorch's functional API over the ops in ``minigrad.ops.nn``.

    import minigrad.nn.functional as F
    loss = F.cross_entropy(F.linear(F.relu(x), w, b), target)

Each function lives right under its Function in ``minigrad/ops/nn/<family>.py`` (which validates the
arguments, then calls the Function); this module only gathers them under PyTorch's names.
"""
from ..ops import one_hot, pad  # PyTorch exposes both in nn.functional
from ..ops.nn.activation import (dropout, dropout1d, dropout2d, dropout3d, gelu, leaky_relu, log_softmax, relu,
                                 sigmoid, silu, softmax, tanh)
from ..ops.nn.attention import scaled_dot_product_attention
from ..ops.nn.conv import conv1d, conv2d, conv_transpose2d
from ..ops.nn.embedding import embedding
from ..ops.nn.linear import linear
from ..ops.nn.loss import (binary_cross_entropy, binary_cross_entropy_with_logits, cross_entropy, huber_loss,
                           l1_loss, mse_loss, nll_loss, smooth_l1_loss)
from ..ops.nn.norm import batch_norm, layer_norm
from ..ops.nn.pool import adaptive_avg_pool2d, avg_pool1d, avg_pool2d, max_pool1d, max_pool2d
from ..ops.nn.upsample import interpolate, upsample

__all__ = [
    "relu", "leaky_relu", "gelu", "sigmoid", "tanh", "silu", "softmax", "log_softmax", "dropout", "dropout1d", "dropout2d", "dropout3d",
    "linear", "conv1d", "conv2d", "conv_transpose2d", "interpolate", "upsample", "max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d",
    "adaptive_avg_pool2d", "layer_norm", "batch_norm", "embedding", "cross_entropy", "nll_loss",
    "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "scaled_dot_product_attention",
]
