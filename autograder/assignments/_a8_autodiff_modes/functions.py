"""The functions a8 grades, each written once against an ``ops`` namespace.

Part 1 (forward mode): ``m`` is the student's notebook namespace in the child (their ``Dual`` operators,
``exp``, ``log``, ``sin``, ``dual_sum``, ``softmax``) or ``NumpyOps`` in the parent, where the same expression
gives the value whose central differences are the expected tangent. Parts 2 and 3: ``ops`` gives ``tanh``,
``softplus`` and ``lse`` as the student's Functions (child) or minigrad's own ops (parent).
"""
import numpy as np


class NumpyOps:
    """Part 1's ops on plain float64 arrays (the parent's reference)."""
    exp, log, sin = staticmethod(np.exp), staticmethod(np.log), staticmethod(np.sin)

    @staticmethod
    def dual_sum(x, dim=None, keepdim=False):
        return np.sum(x, axis=dim, keepdims=keepdim)

    @staticmethod
    def softmax(x, dim=-1):
        z = np.exp(x - np.max(x, axis=dim, keepdims=True))
        return z / np.sum(z, axis=dim, keepdims=True)


def _dim(p):
    d = p.get("dim")
    return tuple(d) if isinstance(d, list) else d


# op -> f(m, a, b, p): a (and b) are Duals in the child, arrays in the parent; "const" cases pass an array
PART1 = {
    "add": lambda m, a, b, p: a + b,
    "sub": lambda m, a, b, p: a - b,
    "mul": lambda m, a, b, p: a * b,
    "div": lambda m, a, b, p: a / b,
    "neg": lambda m, a, b, p: -a,
    "exp": lambda m, a, b, p: m.exp(a),
    "log": lambda m, a, b, p: m.log(a),
    "sin": lambda m, a, b, p: m.sin(a),
    "matmul": lambda m, a, b, p: a @ b,
    "sum": lambda m, a, b, p: m.dual_sum(a, _dim(p), p.get("keepdim", False)),
    "softmax": lambda m, a, b, p: m.softmax(a, p["dim"]),
}


def composed(m, x, c):
    """A function of x through every op of part 1 (c: constants W, b)."""
    h = m.sin(x @ c["W"]) * 2.0 + c["b"]
    s = m.softmax(h, -1)
    z = m.log(m.exp(x) + 1.0) / (1.0 + x * x)
    return m.dual_sum(s * (z @ c["W"]) - h / 3.0, 0)



# ---- parts 2 and 3 ---------------------------------------------------------------------------------------
class StudentOps:
    """The student's Functions (part 2's cell; the reference's in part 3) as ops."""

    def __init__(self, ns):
        self.ns = ns

    def tanh(self, t):
        return self.ns.Tanh.apply(t)

    def softplus(self, t):
        return self.ns.Softplus.apply(t)

    def lse(self, t, dim):
        return self.ns.LogSumExp.apply(t, dim=dim)


class MinigradOps:
    """minigrad's own ops (the parent's reference for parts 2 and 3)."""

    @staticmethod
    def tanh(t):
        return t.tanh()

    @staticmethod
    def softplus(t):
        return (t.exp() + 1.0).log()

    @staticmethod
    def lse(t, dim):
        return t.logsumexp(dim)


def part2_op(ops, name, x, p):
    if name == "tanh":
        return ops.tanh(x)
    if name == "softplus":
        return ops.softplus(x)
    return ops.lse(x, p["dim"])


def hidden_fn(ops, name, c):
    """Part 3's functions of one Tensor ``x`` (c: constant Tensors)."""
    if name == "mix":
        return lambda x: (ops.softplus(x) * x).sum() + ops.lse(ops.tanh(x) * c["s"], 1).sum()
    if name == "quadratic_form":
        return lambda x: ((x @ c["A"]) * x).sum() * 0.5 + ops.tanh(x).sum()
    if name == "coupled":
        return lambda x: ops.lse(ops.tanh(x @ c["A"]) + x, 0).sum() + (ops.softplus(x).sum() ** 2) * 0.1
    if name == "mlp":   # the loss of a 3-4-1 MLP as a function of its flat parameter vector
        def loss(theta):
            w1, b1, w2 = theta[:12].reshape(3, 4), theta[12:16], theta[16:20].reshape(4, 1)
            h = ops.tanh(c["X"] @ w1 + b1)
            return ((h @ w2 - c["Y"]) ** 2).mean() + ops.softplus(theta).mean() * 0.01
        return loss
    if name == "large":
        return lambda x: (ops.softplus(x) * x).sum() + ops.lse(ops.tanh(x).reshape(-1, 100), 1).sum()
    raise KeyError(name)
