"""a8_autodiff_modes: forward mode with dual numbers, twice-differentiable ops, Hessian-vector products.

  part1  Dual (+ - * / @), exp, log, sin,      values vs NumPy, tangents vs float64 central differences
         dual_sum, softmax, jvp                (directional, on hidden shapes); a composed function
  part2  Tanh, Softplus, LogSumExp             first derivatives, second derivatives with respect to the
         (Functions with backward and vjp)     input and to the upstream gradient (gradgradcheck) vs
                                               central differences of minigrad's own first derivatives; a
                                               gradient penalty trained through the student's Tanh
  part3  hvp(f, x, v)                          H v of hidden functions (the reference's part-2 ops and
                                               minigrad's), of an MLP's loss, and at 20,000 dims (a full
                                               Hessian would not fit the child's 2 GiB) vs central
                                               differences of the gradient

The child runs the student's code on arrays the parent built and returns arrays; every expected value is
computed in the parent (``_a8_autodiff_modes/references.py``) from NumPy, central differences or minigrad's
own ops. No solution code lives here.
"""
import numpy as np

from autograder import verdicts as V
from autograder.spec import Assignment, Case, Part, Test, Verdict
from autograder.assignments._a8_autodiff_modes import functions as FN

TOL1 = dict(rtol=1e-6, atol=1e-8)


def _rng(p):
    return np.random.default_rng(p["seed"])


# ---- part 1: forward mode ------------------------------------------------------------------------------------
def inputs_dual(p):
    rng = _rng(p)
    a = rng.standard_normal(p["a"]) * p.get("scale", 1.0)
    if p["op"] in ("log",):
        a = np.abs(a) + 0.5
    out = {"a": a, "da": rng.standard_normal(p["a"])}
    if p.get("b") is not None:
        b = rng.standard_normal(p["b"])
        if p["op"] == "div":
            b = np.sign(b) * (np.abs(b) + 0.5)
        out["b"] = b
        out["db"] = rng.standard_normal(p["b"])
    return out


def observe_dual(ns, case):
    p = case.params
    A = ns.Dual(case["a"].copy(), case["da"].copy())
    b = case.inputs.get("b")
    if b is not None and p.get("b_dual", True):
        b = ns.Dual(b.copy(), case["db"].copy())
    elif b is not None:
        b = b.copy()
    f = FN.PART1[p["op"]]
    out = f(ns, b, A, p) if p.get("const_first") else f(ns, A, b, p)
    return {"value": np.asarray(out.value, dtype=np.float64), "tangent": np.asarray(out.tangent, dtype=np.float64)}


def verdict_dual(case, obs, ctx):
    from autograder.assignments._a8_autodiff_modes import references as R
    p = case.params
    value, tangent = R.part1_reference(p, case)
    what = _call(p)
    v = V.compare(f"{what}: value", obs.get("value"), value, rtol=1e-10, atol=1e-12, what="value")
    if not v.passed:
        return v
    v = V.compare(f"{what}: tangent", obs.get("tangent"), tangent, what="tangent", **TOL1)
    if not v.passed:
        got = np.asarray(obs.get("tangent"), dtype=np.float64)
        return Verdict.fail(v.message + R.mistake_of(p, case, got))
    return v


def _call(p):
    a = f"Dual{tuple(p['a'])}"
    b = ("Dual" if p.get("b_dual", True) else "array") + str(tuple(p["b"])) if p.get("b") is not None else ""
    sym = {"add": "+", "sub": "-", "mul": "*", "div": "/", "matmul": "@"}
    op = p["op"]
    if op in sym:
        return f"{b} {sym[op]} {a}" if p.get("const_first") else f"{a} {sym[op]} {b}"
    if op == "neg":
        return f"-{a}"
    if op == "sum":
        return f"dual_sum({a}, dim={p.get('dim')}, keepdim={p.get('keepdim', False)})"
    if op == "softmax":
        return f"softmax({a}, dim={p['dim']})" + (f" (values of size {p['scale']:g})" if p.get("scale") else "")
    return f"{op}({a})"


def inputs_composed(p):
    rng = _rng(p)
    n, d, k = p["n"], p["d"], p["k"]
    return {"x": rng.standard_normal((n, d)), "v": rng.standard_normal((n, d)),
            "W": rng.standard_normal((d, k)) / np.sqrt(d), "b": rng.standard_normal(k)}


def observe_composed(ns, case):
    c = {"W": case["W"].copy(), "b": case["b"].copy()}
    value, tangent = ns.jvp(lambda x: FN.composed(ns, x, c), case["x"].copy(), case["v"].copy())
    return {"value": np.asarray(value, dtype=np.float64), "tangent": np.asarray(tangent, dtype=np.float64)}


def verdict_composed(case, obs, ctx):
    from autograder.assignments._a8_autodiff_modes import references as R
    c = {"W": case["W"], "b": case["b"]}
    f = lambda x: FN.composed(FN.NumpyOps, x, c)   # noqa: E731
    v = V.compare("jvp(f, x, v): the value f(x)", obs.get("value"), f(case["x"]), rtol=1e-10, atol=1e-12,
                  what="value")
    return v & V.compare("jvp(f, x, v): the tangent J_f(x) v", obs.get("tangent"),
                         R.directional(f, [case["x"]], [case["v"]]), what="tangent", **TOL1)


# ---- part 2: twice-differentiable ops ------------------------------------------------------------------------
def inputs_op2(p):
    rng = _rng(p)
    x = rng.standard_normal(p["x"]) * p.get("scale", 1.0)
    from autograder.assignments._a8_autodiff_modes.references import op_value
    out_shape = np.shape(op_value(p["op"], x, p))
    return {"x": x, "u": rng.standard_normal(out_shape), "w": rng.standard_normal(p["x"])}


_OPNAME = {"tanh": "Tanh", "softplus": "Softplus", "lse": "LogSumExp"}


def observe_first(ns, case):
    import minigrad as mg
    p = case.params
    X = mg.tensor(case["x"].copy(), requires_grad=True)
    y = FN.part2_op(FN.StudentOps(ns), p["op"], X, p)
    g, = mg.autograd.grad(y, X, mg.tensor(case["u"].copy()))
    return {"y": y.detach().numpy(), "g": g.numpy()}


def verdict_first(case, obs, ctx):
    from autograder.assignments._a8_autodiff_modes import references as R
    p = case.params
    name = f"{_OPNAME[p['op']]}.apply(x of shape {tuple(p['x'])}{', dim=' + str(p['dim']) if 'dim' in p else ''})"
    v = V.compare(f"{name}: forward", obs.get("y"), R.op_value(p["op"], case["x"], p), rtol=1e-10, atol=1e-12)
    if not v.passed:
        return v
    f = lambda x: R.op_value(p["op"], x, p)   # noqa: E731
    num = V.numeric_vjp(f, [case["x"]], case["u"])[0]
    return V.compare(f"{name}: backward (the gradient of <y, u> with respect to x)", obs.get("g"), num,
                     what="gradient", **TOL1)


def observe_second(ns, case):
    import minigrad as mg
    p = case.params
    X = mg.tensor(case["x"].copy(), requires_grad=True)
    U = mg.tensor(case["u"].copy(), requires_grad=True)
    y = FN.part2_op(FN.StudentOps(ns), p["op"], X, p)
    g, = mg.autograd.grad(y, X, U, create_graph=True)
    out = {"g": g.detach().numpy(), "connected": np.array(bool(g.requires_grad))}
    if g.requires_grad:
        hx, hu = mg.autograd.grad(g, (X, U), mg.tensor(case["w"].copy()), allow_unused=True)
        out["hx"] = np.zeros_like(case["x"]) if hx is None else hx.numpy()
        out["hu"] = np.zeros_like(case["u"]) if hu is None else hu.numpy()
    return out


def verdict_second(case, obs, ctx):
    from autograder.assignments._a8_autodiff_modes import references as R
    p = case.params
    name = _OPNAME[p["op"]]
    x, u, w = case["x"], case["u"], case["w"]
    if not bool(np.asarray(obs.get("connected", False))):
        return Verdict.fail(f"{name}: the gradient returned with create_graph=True does not require grad, so it "
                            f"can't be differentiated again: write vjp(ctx, grad) in Tensor ops on `grad` and "
                            f"ctx.saved_tensors (not on arrays)")
    hx = _grad_of_inner(p, x, u, w)
    hu = R.directional(lambda x_: R.op_value(p["op"], x_, p), [x], [w])     # d/du <J^T u, w> = J w
    v = V.compare(f"{name}: the second derivative d<grad, w>/dx (with respect to the input)", obs.get("hx"), hx,
                  what="gradient", rtol=1e-5, atol=1e-7)
    if not v.passed:
        got = np.asarray(obs.get("hx"), dtype=np.float64)
        if got.shape == hx.shape and not got.any() and np.abs(hx).max() > 1e-6:
            return Verdict.fail(v.message + f"; it is 0 everywhere: {name}.vjp's gradient is cut from x's graph "
                                "(built from .data or NumPy arrays, or from a saved value that is not a Tensor "
                                "of the graph): use the Tensors ctx.saved_tensors gives and minigrad ops")
        if got.shape == hx.shape and np.allclose(got, -hx, rtol=1e-5, atol=1e-7):
            return Verdict.fail(v.message + f"; it has the opposite sign: {name}.vjp must compute the same "
                                "formula as backward, in Tensor ops")
        return v
    return V.compare(f"{name}: the derivative d<grad, w>/du (with respect to the upstream gradient)",
                     obs.get("hu"), hu, what="gradient", rtol=1e-5, atol=1e-7)


def _grad_of_inner(p, x, u, w, eps=1e-5):
    """Central differences over x of <minigrad's gradient of <op(x), u>, w>."""
    from autograder.assignments._a8_autodiff_modes import references as R
    out = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        out[i] = (np.vdot(R.first_order(p["op"], x + e, u, p), w) -
                  np.vdot(R.first_order(p["op"], x - e, u, p), w)) / (2 * eps)
    return out


def inputs_penalty(p):
    rng = _rng(p)
    return {"X": rng.standard_normal((p["n"], p["d"])), "W": rng.standard_normal((p["d"], p["h"])) * 0.7,
            "a": rng.standard_normal(p["h"])}


def observe_penalty(ns, case):
    import minigrad as mg
    X = mg.tensor(case["X"].copy(), requires_grad=True)
    W = mg.tensor(case["W"].copy(), requires_grad=True)
    D = (ns.Tanh.apply(X @ W) @ mg.tensor(case["a"].copy())).sum()
    gx, = mg.autograd.grad(D, X, create_graph=True)
    P = (((gx * gx).sum(1) - 1.0) ** 2).sum()
    gW, = mg.autograd.grad(P, W)
    return {"P": P.detach().numpy(), "gW": gW.numpy()}


def verdict_penalty(case, obs, ctx):
    from autograder.assignments._a8_autodiff_modes import references as R
    X, W, a = case["X"], case["W"], case["a"]
    v = V.compare("the gradient penalty sum((|grad_x D|^2 - 1)^2)", obs.get("P"), R.penalty_np(W, X, a),
                  rtol=1e-10, atol=1e-12, what="penalty")
    num = V.numeric_vjp(lambda W_: R.penalty_np(W_, X, a), [W])[0]
    return v & V.compare("the penalty's gradient with respect to W (through your Tanh's vjp)", obs.get("gW"), num,
                         what="gradient", rtol=1e-5, atol=1e-7)


# ---- part 3: Hessian-vector products -------------------------------------------------------------------------
def inputs_hvp(p):
    rng = _rng(p)
    shape = tuple(p["x"])
    out = {"x": rng.standard_normal(shape) * 0.8, "v": rng.standard_normal(shape)}
    d = shape[-1]
    if p["fn"] == "mix":
        out["s"] = rng.standard_normal(shape[-1:]) if len(shape) > 1 else rng.standard_normal(1)
    if p["fn"] in ("quadratic_form", "coupled"):
        A = rng.standard_normal((d, d)) / np.sqrt(d)
        out["A"] = A + A.T if p["fn"] == "quadratic_form" else A
    if p["fn"] == "mlp":
        out["X"], out["Y"] = rng.standard_normal((8, 3)), rng.standard_normal((8, 1))
    return out


CONSTS = {"mix": ("s",), "quadratic_form": ("A",), "coupled": ("A",), "mlp": ("X", "Y"), "large": ()}


def observe_hvp(ns, case):
    import minigrad as mg
    p = case.params
    c = {k: mg.tensor(case[k].copy()) for k in CONSTS[p["fn"]]}
    f = FN.hidden_fn(FN.StudentOps(ns), p["fn"], c)
    hv = ns.hvp(f, mg.tensor(case["x"].copy()), mg.tensor(case["v"].copy()))
    return {"hv": np.asarray(hv.detach().numpy() if hasattr(hv, "detach") else hv, dtype=np.float64)}


def verdict_hvp(case, obs, ctx):
    from autograder.assignments._a8_autodiff_modes import references as R
    p = case.params
    consts = {k: case[k] for k in CONSTS[p["fn"]]}
    expected = R.hvp_reference(p["fn"], consts, case["x"], case["v"])
    v = V.compare(f"hvp(f, x, v) for x of shape {tuple(p['x'])}", obs.get("hv"), expected, what="H v",
                  rtol=1e-5, atol=1e-7)
    if not v.passed:
        got = np.asarray(obs.get("hv"), dtype=np.float64)
        g = R.gradient_of(p["fn"], consts, case["x"])
        if got.shape == g.shape and np.allclose(got, g, rtol=1e-6, atol=1e-9):
            return Verdict.fail(v.message + "; you returned the gradient itself: differentiate <gradient, v> "
                                "once more (the gradient taken with create_graph=True)")
    return v


# ---- the assignment -----------------------------------------------------------------------------------------
def _label(p, skip=("seed",)):
    def show(v):
        return str(tuple(v)) if isinstance(v, list) and all(isinstance(i, int) for i in v) else str(v)
    return ", ".join(f"{k}={show(v)}" for k, v in p.items() if k not in skip)


def _cases(*ps):
    return [Case(dict(p), label=_label(p)) for p in ps]


def _dual(op, points, *shapes):
    return Test(op, points, observe_dual, verdict_dual, inputs_dual, partial=True,
                cases=_cases(*({"op": op, "seed": i, **s} for i, s in enumerate(shapes))))


FORBIDDEN = ["minigrad.autograd.forward_ad", "minigrad.func", "minigrad.ops", "minigrad.tanh", "minigrad.logsumexp",
             "*.logsumexp", "*.gradgradcheck", "F.tanh", "F.softplus", "minigrad.nn.functional", "torch", "jax"]
# forward mode's public API (the module's tangent bookkeeping stays: the core reads saved tangents) and the
# function transforms: what parts 1 and 3 would otherwise get for free
STUBS = ["minigrad.autograd.forward_ad.dual_level", "minigrad.autograd.forward_ad.make_dual",
         "minigrad.autograd.forward_ad.unpack_dual", "minigrad.func.transforms"]

ASSIGNMENT = Assignment(
    id="a8",
    name="a8_autodiff_modes",
    title="The modes of differentiation: forward mode, gradients of gradients, Hessian-vector products",
    notebook="a8_autodiff_modes.ipynb",
    solution="solutions/a8_autodiff_modes.ipynb",
    preamble="import math\nimport numpy as np\nimport minigrad as mg\nfrom minigrad.autograd import Function\n",
    timeout=60,
    memory_mb=2048,
    forbidden=FORBIDDEN,
    summary="the student's dual numbers: values vs NumPy and tangents vs float64 central differences on hidden "
            "shapes (matmul, softmax, a reduction, a composed function); their twice-differentiable Functions: "
            "first and second derivatives (gradgradcheck) vs central differences, a gradient penalty; H v of "
            "hidden functions, an MLP's loss and a 20,000-dim function vs central differences of the gradient",
    parts=[
        Part("part1", "Forward mode with dual numbers", cells=["a8-dual"],
             names=["Dual", "exp", "log", "sin", "dual_sum", "softmax", "jvp"], stubs=STUBS,
             objective="one forward pass carries the directional derivative: a JVP rule per op", tests=[
                 Test("arithmetic", 8, observe_dual, verdict_dual, inputs_dual, partial=True, cases=_cases(
                     {"op": "add", "seed": 0, "a": [3, 4], "b": [3, 4]},
                     {"op": "sub", "seed": 1, "a": [3, 4], "b": [4]},
                     {"op": "mul", "seed": 2, "a": [2, 3], "b": [2, 3]},
                     {"op": "mul", "seed": 3, "a": [5], "b": [5], "b_dual": False, "const_first": True},
                     {"op": "div", "seed": 4, "a": [4], "b": [4]},
                     {"op": "div", "seed": 5, "a": [3], "b": [3], "b_dual": False, "const_first": True},
                     {"op": "neg", "seed": 6, "a": [2, 2]})),
                 _dual("exp", 2, {"a": [5]}, {"a": [2, 3]}),
                 _dual("log", 2, {"a": [5]}, {"a": [3, 2]}),
                 _dual("sin", 2, {"a": [4, 2]}),
                 Test("matmul", 8, observe_dual, verdict_dual, inputs_dual, partial=True, cases=_cases(
                     {"op": "matmul", "seed": 10, "a": [3, 4], "b": [4, 2]},
                     {"op": "matmul", "seed": 11, "a": [2, 3, 4], "b": [2, 4, 5]},
                     {"op": "matmul", "seed": 12, "a": [4], "b": [3, 4], "b_dual": False, "const_first": True},
                     {"op": "matmul", "seed": 13, "a": [3, 4], "b": [4], "b_dual": False})),
                 Test("softmax", 8, observe_dual, verdict_dual, inputs_dual, partial=True, cases=_cases(
                     {"op": "softmax", "seed": 20, "a": [3, 5], "dim": 1},
                     {"op": "softmax", "seed": 21, "a": [4, 3], "dim": 0},
                     {"op": "softmax", "seed": 22, "a": [2, 3, 4], "dim": -1, "scale": 1000.0})),
                 Test("sum", 4, observe_dual, verdict_dual, inputs_dual, partial=True, cases=_cases(
                     {"op": "sum", "seed": 30, "a": [3, 4], "dim": None},
                     {"op": "sum", "seed": 31, "a": [3, 4], "dim": 0},
                     {"op": "sum", "seed": 32, "a": [2, 3, 4], "dim": [0, 2], "keepdim": True})),
                 Test("jvp of a composed function", 6, observe_composed, verdict_composed, inputs_composed,
                      partial=True, cases=_cases({"seed": 40, "n": 4, "d": 3, "k": 5},
                                                 {"seed": 41, "n": 2, "d": 6, "k": 2})),
             ]),
        Part("part2", "Twice-differentiable ops", cells=["a8-twice"], names=["Tanh", "Softplus", "LogSumExp"],
             stubs=STUBS + ["minigrad.ops.nn.activation.Tanh", "minigrad.ops.reduce.LogSumExp"],
             objective="a backward written in differentiable ops can itself be differentiated", tests=[
                 Test("first derivatives", 6, observe_first, verdict_first, inputs_op2, partial=True,
                      cases=_cases({"op": "tanh", "seed": 50, "x": [3, 4]}, {"op": "softplus", "seed": 51, "x": [6]},
                                   {"op": "lse", "seed": 52, "x": [3, 5], "dim": 1})),
                 Test("second derivatives (gradgradcheck)", 18, observe_second, verdict_second, inputs_op2,
                      partial=True, cases=_cases(
                          {"op": "tanh", "seed": 60, "x": [3, 4]}, {"op": "softplus", "seed": 61, "x": [5]},
                          {"op": "lse", "seed": 62, "x": [3, 4], "dim": 1},
                          {"op": "lse", "seed": 63, "x": [4, 3], "dim": 0}) + [
                          Case({"op": "lse", "seed": 64, "x": [3, 1], "dim": 1}, trivial=True,
                               label="op=lse, x=(3, 1), dim=1 (the identity: second derivative 0)")]),
                 Test("a gradient penalty through Tanh", 6, observe_penalty, verdict_penalty, inputs_penalty,
                      cases=_cases({"seed": 70, "n": 5, "d": 3, "h": 4})),
             ]),
        Part("part3", "Hessian-vector products", cells=["a8-hvp"], names=["hvp"], stubs=STUBS,
             objective="H v in the cost of about two gradients, never the Hessian", tests=[
                 Test("H v of hidden functions", 14, observe_hvp, verdict_hvp, inputs_hvp, partial=True,
                      cases=_cases({"fn": "mix", "seed": 80, "x": [3, 4]},
                                   {"fn": "quadratic_form", "seed": 81, "x": [5]},
                                   {"fn": "coupled", "seed": 82, "x": [4, 4]})),
                 Test("H v of an MLP's loss", 8, observe_hvp, verdict_hvp, inputs_hvp,
                      cases=_cases({"fn": "mlp", "seed": 83, "x": [20]})),
                 Test("H v at 20,000 dims", 8, observe_hvp, verdict_hvp, inputs_hvp,
                      cases=[Case({"fn": "large", "seed": 84, "x": [20000]},
                                  label="x of 20,000 elements (a full Hessian would need 3.2 GB)")]),
             ]),
    ],
)
