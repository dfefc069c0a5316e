"""Dropout, and channel-wise Dropout1d/2d/3d: active in training mode only (``model.eval()`` turns them
into the identity)."""
from ...ops.nn.activation import check_dropout_p
from .. import functional as F
from ..module import Module


class Dropout(Module):
    """Zero each element with probability ``p`` and scale the rest by 1 / (1 - p), in training mode.

    ``generator``: an ``mg.Generator`` for the masks (default: the global one).
    """

    def __init__(self, p=0.5, inplace=False, generator=None):
        super().__init__()
        self.p = check_dropout_p("Dropout", p)
        self.inplace = inplace
        self.generator = generator

    def forward(self, input):
        return F.dropout(input, self.p, self.training, generator=self.generator)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class _DropoutNd(Module):
    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        self.p = check_dropout_p(type(self).__name__, p)
        self.inplace = inplace

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(_DropoutNd):
    """Zero whole channels of (N, C, L) / (C, L) inputs with probability ``p``, in training mode."""

    def forward(self, input):
        return F.dropout1d(input, self.p, self.training)


class Dropout2d(_DropoutNd):
    """Zero whole channels (feature maps) of (N, C, H, W) inputs with probability ``p``, in training mode."""

    def forward(self, input):
        return F.dropout2d(input, self.p, self.training)


class Dropout3d(_DropoutNd):
    """Zero whole channels of (N, C, D, H, W) / (C, D, H, W) inputs with probability ``p``, in training mode."""

    def forward(self, input):
        return F.dropout3d(input, self.p, self.training)
