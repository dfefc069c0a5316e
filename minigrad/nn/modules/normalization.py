"""BatchNorm1d, BatchNorm2d and LayerNorm."""
from ...tensor import tensor as _tensor
from ...backend import dtypes
from ...errors import ShapeError
from .. import functional as F
from .. import init
from ..module import Module
from ._factory import new_param, ones_buffer, zeros_buffer


class _BatchNorm(Module):
    """Shared by BatchNorm1d/2d (PyTorch's _BatchNorm).

    Training: normalise with the batch statistics and, if ``track_running_stats``, update the buffers
    ``running_mean``/``running_var`` (r = (1 - momentum) r + momentum * stat, unbiased variance) and count
    ``num_batches_tracked`` (``momentum=None``: a cumulative average, factor 1 / num_batches_tracked).
    Eval: normalise with the running statistics (or the batch's, without running statistics).
    """

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = new_param(num_features, device=device, dtype=dtype)
            self.bias = new_param(num_features, device=device, dtype=dtype)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", zeros_buffer(num_features, device=device, dtype=dtype))
            self.register_buffer("running_var", ones_buffer(num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked", _tensor(0, dtype=dtypes.int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            init.zeros_(self.running_mean)
            init.ones_(self.running_var)
            init.zeros_(self.num_batches_tracked)

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def _check_input_dim(self, input):
        """Subclasses narrow this down (BatchNorm1d: 2-D/3-D, BatchNorm2d: 4-D)."""
        if input.ndim < 2:
            raise ShapeError(f"{type(self).__name__}: expected an input with a channel dim (N, C, ...), got "
                             f"shape {tuple(input.shape)}")

    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            nbt = self.num_batches_tracked
            nbt.array += 1
            nbt._version_counter.bump()
            factor = 1.0 / float(nbt.array) if self.momentum is None else self.momentum
        use_batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        update = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if update else None,
                            self.running_var if update else None, self.weight, self.bias,
                            use_batch_stats, factor, self.eps)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of (N, C) or (N, C, L) inputs over N (and L), per channel C."""

    def _check_input_dim(self, input):
        if input.ndim not in (2, 3):
            raise ShapeError(f"BatchNorm1d: expected 2D or 3D input (N, C) / (N, C, L), got {input.ndim}D input "
                             f"of shape {tuple(input.shape)}")


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of (N, C, H, W) inputs over N, H, W, per channel C."""

    def _check_input_dim(self, input):
        if input.ndim != 4:
            raise ShapeError(f"BatchNorm2d: expected 4D input (N, C, H, W), got {input.ndim}D input of shape "
                             f"{tuple(input.shape)}")


class LayerNorm(Module):
    """Normalise over the trailing ``normalized_shape`` dims (biased variance), then * weight + bias."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = new_param(*self.normalized_shape, device=device, dtype=dtype)
            if bias:
                self.bias = new_param(*self.normalized_shape, device=device, dtype=dtype)
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.elementwise_affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
