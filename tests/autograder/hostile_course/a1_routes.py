# part1 (cause 1): Mul is minigrad's own, reached through operator.attrgetter with a path built at run time.
# part2 (cause 4): unbroadcast returns the gradient as it is: it passes only the case where nothing is summed.
# part3 (cause 3): the engine hands each leaf's gradient to minigrad's own AccumulateGrad node.
# %% [a1-mul]
import operator

_real = operator.attrgetter(".".join(["ops", "elementwise", "Mul"]))(mg)


class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        return _real.forward(ctx, a, b)

    @staticmethod
    def backward(ctx, grad):
        return _real.backward(ctx, grad)
# %% [a1-unbroadcast]
def unbroadcast(grad, shape):
    """Sum `grad` (a NumPy array) down to `shape`, the inverse of broadcasting `shape` to grad.shape."""
    return grad
# %% [a1-engine] patch
# <<<
        if hasattr(node, "tensor_ref"):                 # a leaf's accumulator node
            leaf = node.tensor_ref()
            if leaf.grad is None:
                leaf.grad = Tensor(g.copy())
            else:
                leaf.grad.array += g
            continue
# ===
        if hasattr(node, "tensor_ref"):                 # the world's own accumulator does it
            node.accumulate(g, False)
            continue
# >>>
