"""Dropout: active in training mode only (``model.eval()`` turns it into the identity)."""
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
