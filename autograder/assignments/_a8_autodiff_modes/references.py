"""Parent-side references of a8: directional central differences (float64), minigrad's own first-order
gradients for the second-order checks, and the usual mistakes each op's tangent is tried against."""
import numpy as np

from .functions import PART1, MinigradOps, NumpyOps, hidden_fn, part2_op

EPS = 1e-6


def directional(f, xs, vs, eps=EPS):
    """(f(xs + eps vs) - f(xs - eps vs)) / (2 eps): the exact JVP up to O(eps^2)."""
    plus = f(*[x + eps * v for x, v in zip(xs, vs)])
    minus = f(*[x - eps * v for x, v in zip(xs, vs)])
    return (np.asarray(plus) - np.asarray(minus)) / (2 * eps)


def part1_reference(p, case):
    """(value, tangent) of op p['op'] on the case's inputs."""
    f = PART1[p["op"]]
    a, da = case["a"], case["da"]
    b = case.inputs.get("b")
    db = case.inputs.get("db") if p.get("b_dual", True) and b is not None else None
    first = p.get("const_first", False)

    def g(a_, b_):
        return f(NumpyOps, b_, a_, p) if first else f(NumpyOps, a_, b_, p)
    value = g(a, b)
    if db is None:
        tangent = directional(lambda a_: g(a_, b), [a], [da])
    else:
        tangent = directional(g, [a, b], [da, db])
    return np.asarray(value, dtype=np.float64), np.asarray(tangent, dtype=np.float64)


def _softmax(a, dim):
    return NumpyOps.softmax(a, dim)


# op -> [(wrong tangent(a, b, da, db, p), what to say)]: tried when a tangent is wrong
MISTAKES = {
    "mul": [(lambda a, b, da, db, p: da * b, "only da * b: the product rule also adds a * db"),
            (lambda a, b, da, db, p: da * db, "da * db: the tangent of a * b is da * b + a * db (eps**2 = 0 "
                                              "drops da * db)")],
    "div": [(lambda a, b, da, db, p: (a * db - da * b) / (b * b), "the quotient rule with the wrong sign: "
                                                                 "(da * b - a * db) / b**2"),
            (lambda a, b, da, db, p: da / b, "only da / b: the quotient rule also subtracts a * db / b**2")],
    "matmul": [(lambda a, b, da, db, p: da @ b, "only dA @ B: the tangent of A @ B is dA @ B + A @ dB"),
               (lambda a, b, da, db, p: a @ db, "only A @ dB: the tangent of A @ B is dA @ B + A @ dB")],
    "softmax": [(lambda a, b, da, db, p: _softmax(a, p["dim"]) * da,
                 "s * da: the tangent of softmax is s * (da - sum(s * da, dim, keepdims=True))"),
                (lambda a, b, da, db, p: _softmax(a, p["dim"]) * (da - (_softmax(a, p["dim"]) * da).sum()),
                 "s * (da - sum(s * da)) summed over every dim: sum over `dim` only (keepdims=True)")],
    "log": [(lambda a, b, da, db, p: da * a, "da * a: the derivative of log(a) is 1 / a"),
            (lambda a, b, da, db, p: da / np.log(a), "da / log(a): the derivative of log(a) is 1 / a")],
    "sin": [(lambda a, b, da, db, p: -np.cos(a) * da, "-cos(a) * da: the derivative of sin is +cos"),
            (lambda a, b, da, db, p: np.cos(da), "cos(da): the tangent is cos(a) * da")],
    "exp": [(lambda a, b, da, db, p: np.exp(da), "exp(da): the tangent of exp(a) is exp(a) * da")],
    "sub": [(lambda a, b, da, db, p: da + db, "da + db: the tangent of a - b is da - db")],
}


def mistake_of(p, case, got):
    a, da = case["a"], case["da"]
    b = case.inputs.get("b")
    db = case.inputs.get("db") if b is not None else None
    if db is None and b is not None:
        db = np.zeros_like(b)
    if p.get("const_first"):
        return ""
    for wrong, say in MISTAKES.get(p["op"], []):
        try:
            exp = np.asarray(wrong(a, b, da, db, p), dtype=np.float64)
        except Exception:
            continue
        if exp.shape == got.shape and np.allclose(got, exp, rtol=1e-6, atol=1e-9):
            return f"; your tangent is {say}"
    return ""


# ---- part 2: minigrad's own ops in the parent --------------------------------------------------------------
def _mg():
    import minigrad as mg
    return mg


def first_order(name, x, u, p):
    """minigrad's gradient of <op(x), u> with respect to x (float64)."""
    mg = _mg()
    X = mg.tensor(x, requires_grad=True)
    y = part2_op(MinigradOps, name, X, p)
    g, = mg.autograd.grad(y, X, mg.tensor(u))
    return g.numpy()


def op_value(name, x, p):
    mg = _mg()
    with mg.no_grad():
        return part2_op(MinigradOps, name, mg.tensor(x), p).numpy()


def penalty_np(W, X, a):
    """Sum over rows of (|grad_x D(x)|^2 - 1)^2 for D(x) = tanh(x @ W) @ a: the gradient penalty."""
    t = np.tanh(X @ W)
    gx = (a * (1 - t * t)) @ W.T
    return (((gx * gx).sum(1) - 1.0) ** 2).sum()


def gradient_of(name, consts, x):
    """minigrad's gradient of part 3's function ``name`` at x (float64), in the parent."""
    mg = _mg()
    X = mg.tensor(x, requires_grad=True)
    f = hidden_fn(MinigradOps, name, {k: mg.tensor(v) for k, v in consts.items()})
    g, = mg.autograd.grad(f(X), X)
    return g.numpy()


def hvp_reference(name, consts, x, v, eps=1e-5):
    return (gradient_of(name, consts, x + eps * v) - gradient_of(name, consts, x - eps * v)) / (2 * eps)
