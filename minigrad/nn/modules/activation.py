"""Activation layers: ReLU, LeakyReLU, GELU, Sigmoid, Tanh, SiLU, Softmax, LogSoftmax.

PyTorch also keeps MultiheadAttention in ``torch.nn.modules.activation``; programs that name it by that
path (e.g. in a ``safe_globals`` list) find minigrad's here.
"""
from .. import functional as F
from ..module import Module
from .attention import MultiheadAttention  # noqa: F401  (PyTorch's module path)


class ReLU(Module):
    """max(x, 0). ``inplace`` is accepted for PyTorch compatibility (the result is a new tensor)."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.relu(input)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class LeakyReLU(Module):
    """x if x > 0 else negative_slope * x."""

    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class GELU(Module):
    """x * Phi(x); ``approximate='tanh'`` uses the tanh approximation (GPT-2's)."""

    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class Sigmoid(Module):
    def forward(self, input):
        return F.sigmoid(input)


class Tanh(Module):
    def forward(self, input):
        return F.tanh(input)


class SiLU(Module):
    """x * sigmoid(x) (a.k.a. swish)."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.silu(input)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class Softmax(Module):
    """softmax along ``dim`` (``dim=None``: PyTorch's legacy implicit choice, with a warning)."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.log_softmax(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"
