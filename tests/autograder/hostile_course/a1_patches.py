# part1 (cause 2): Exp's backward is wrong, and its cell replaces Tensor.backward (what the grader runs the
# student's ops with) by one that writes the right gradient of an Exp node itself: the guard sees the
# grader's function replaced.
# part4 (cause 1): im2col is minigrad's convolution helper, imported through getattr on __builtins__.
# %% [a1-exp]
class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return np.exp(x)

    @staticmethod
    def backward(ctx, grad):
        return grad * 0.0


_plain_backward = Tensor.backward


def _cheating_backward(self, gradient=None):
    node = self.grad_fn
    if type(node).__name__ == "Exp":
        (x,) = node.saved_tensors
        leaf = node.next[0].node.tensor_ref()
        leaf.grad = Tensor(np.asarray(gradient.array if gradient is not None else 1.0) * np.exp(x))
        return None
    return _plain_backward(self, gradient)


Tensor.backward = _cheating_backward
# %% [a1-im2col] patch
# <<<
def im2col(x, kh, kw, stride=1, padding=0):
    """(N, C, H, W) -> (N*OH*OW, C*kh*kw): every window as a row, in (c, i, j) order."""
# ===
_conv = getattr(__builtins__, "__imp" + "ort__")("minigrad.ops.nn." + "conv", fromlist=["x"])


def im2col(x, kh, kw, stride=1, padding=0):
    """(N, C, H, W) -> (N*OH*OW, C*kh*kw): every window as a row, in (c, i, j) order."""
    _conv.conv_padding("conv2d", padding, (kh, kw), (stride, stride), (1, 1), 2)
# >>>
