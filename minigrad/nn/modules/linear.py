"""Linear and Identity."""
import math

from .. import functional as F
from .. import init
from ..module import Module
from ._factory import new_param


class Identity(Module):
    """Returns its input; accepts and ignores any constructor arguments (as PyTorch)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """y = x @ W.T + b with W of shape (out_features, in_features); any leading dims on x.

    Initialised like PyTorch: W ~ kaiming_uniform_(a=sqrt(5)) = U(-1/sqrt(in), 1/sqrt(in)), b ~ the same.
    """

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = new_param(out_features, in_features, device=device, dtype=dtype)
        if bias:
            self.bias = new_param(out_features, device=device, dtype=dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self, generator=None):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5), generator=generator)
        if self.bias is not None:
            fan_in = self.in_features
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound, generator=generator)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class NonDynamicallyQuantizableLinear(Linear):
    """PyTorch's name for the Linear inside its MultiheadAttention (a marker for its quantization tools);
    here a plain Linear, so that programs naming it (e.g. in ``safe_globals`` lists) run."""
