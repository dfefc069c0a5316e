"""Conv1d and Conv2d (cross-correlation, as PyTorch), and ConvTranspose2d (their input gradient as a layer)."""
import math

from ...errors import ArgumentError
from ...ops.nn._util import ntuple
from ...ops.nn.conv import check_groups, conv_padding
from .. import functional as F
from .. import init
from ..module import Module
from ._factory import new_param


class _ConvNd(Module):
    _nd = 2
    _fn = None

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        nd = self._nd
        check_groups(name, groups)
        if in_channels % groups:
            raise ArgumentError(f"{name}: in_channels ({in_channels}) must be divisible by groups ({groups})")
        if out_channels % groups:
            raise ArgumentError(f"{name}: out_channels ({out_channels}) must be divisible by groups ({groups})")
        if padding_mode != "zeros":
            raise ArgumentError(f"{name}: padding_mode {padding_mode!r} is not supported by minigrad "
                                f"(only 'zeros')")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = ntuple(name, "kernel_size", kernel_size, nd, 1)
        self.stride = ntuple(name, "stride", stride, nd, 1)
        self.dilation = ntuple(name, "dilation", dilation, nd, 1)
        if isinstance(padding, str):  # 'same' or 'valid' ('same' only unstrided), as F.conv* accepts
            conv_padding(name, padding, self.kernel_size, self.stride, self.dilation, nd)
            self.padding = padding
        else:
            self.padding = ntuple(name, "padding", padding, nd, 0)
        self.padding_mode = padding_mode
        self.weight = new_param(out_channels, in_channels // groups, *self.kernel_size, device=device,
                                dtype=dtype)
        if bias:
            self.bias = new_param(out_channels, device=device, dtype=dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self, generator=None):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5), generator=generator)
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound, generator=generator)

    def forward(self, input):
        return type(self)._fn(input, self.weight, self.bias, self.stride, self.padding, self.dilation,
                              self.groups)

    def extra_repr(self):
        nd = self._nd
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * nd:
            s += f", padding={self.padding!r}" if isinstance(self.padding, str) else f", padding={self.padding}"
        if self.dilation != (1,) * nd:
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv1d(_ConvNd):
    """1-D convolution over (N, C_in, L) -> (N, C_out, L_out); weight (C_out, C_in / groups, k)."""
    _nd = 1
    _fn = staticmethod(F.conv1d)


class Conv2d(_ConvNd):
    """2-D convolution over (N, C_in, H, W) -> (N, C_out, H_out, W_out); weight (C_out, C_in / groups, kh, kw).

    Initialised like PyTorch: kaiming_uniform_(a=sqrt(5)) weights, U(±1/sqrt(fan_in)) bias.
    """
    _nd = 2
    _fn = staticmethod(F.conv2d)


class ConvTranspose2d(Module):
    """2-D transposed convolution (N, C_in, H, W) -> (N, C_out, H_out, W_out), H_out = (H - 1) stride
    - 2 padding + dilation (kh - 1) + output_padding + 1; weight (C_in, C_out / groups, kh, kw).
    Initialised as PyTorch's (kaiming_uniform_(a=sqrt(5)) with fan_in = C_out / groups * kh * kw)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        name = "ConvTranspose2d"
        check_groups(name, groups)
        for what, n in (("in_channels", in_channels), ("out_channels", out_channels)):
            if n % groups:
                raise ArgumentError(f"{name}: {what} ({n}) must be divisible by groups ({groups})")
        if padding_mode != "zeros":
            raise ArgumentError(f"{name}: only padding_mode='zeros' is supported (as in PyTorch), got {padding_mode!r}")
        self.in_channels, self.out_channels, self.groups, self.padding_mode = in_channels, out_channels, groups, padding_mode
        self.kernel_size = ntuple(name, "kernel_size", kernel_size, 2, 1)
        self.stride = ntuple(name, "stride", stride, 2, 1)
        self.padding = ntuple(name, "padding", padding, 2, 0)
        self.output_padding = ntuple(name, "output_padding", output_padding, 2, 0)
        self.dilation = ntuple(name, "dilation", dilation, 2, 1)
        self.weight = new_param(in_channels, out_channels // groups, *self.kernel_size, device=device, dtype=dtype)
        if bias:
            self.bias = new_param(out_channels, device=device, dtype=dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    reset_parameters = _ConvNd.reset_parameters

    def forward(self, input, output_size=None):
        out_pad = self.output_padding
        if output_size is not None:       # the output_padding that gives this size (PyTorch's _output_padding)
            want = tuple(output_size)[-2:]
            base = tuple((h - 1) * s - 2 * p + d * (k - 1) + 1 for h, s, p, d, k in
                         zip(input.shape[-2:], self.stride, self.padding, self.dilation, self.kernel_size))
            out_pad = tuple(w - b for w, b in zip(want, base))
        return F.conv_transpose2d(input, self.weight, self.bias, self.stride, self.padding, out_pad, self.groups,
                                  self.dilation)

    def extra_repr(self):
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        for what, default in (("padding", (0, 0)), ("output_padding", (0, 0)), ("dilation", (1, 1))):
            if getattr(self, what) != default:
                s += f", {what}={getattr(self, what)}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        return s + (", bias=False" if self.bias is None else "")
