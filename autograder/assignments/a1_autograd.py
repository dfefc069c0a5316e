"""a1_autograd: the student rebuilds minigrad's autograd, graded against float64 central differences.

  part1  Mul, Div, Exp, Log, ReLU                 Functions: forward + backward (a VJP per input)
  part2  unbroadcast, Sum, MatMul, Reshape,       shapes: broadcasting, reductions, batched matmul,
         Transpose, Softmax, LogSoftmax,          numerically stable softmax, and a loss composed of
         cross_entropy                            the student's ops
  part3  backward(output, grad), numerical_grad   the engine (topological order, sums over paths,
                                                  un-broadcasting, accumulation) and a gradient checker
  part4  im2col, col2im, Conv2d                   conv2d as one GEMM; col2im is im2col's adjoint

How each part is judged (in the parent; the child only runs the student's code and returns arrays):
- ops (parts 1, 2 and Conv2d): the child builds float64 leaf Tensors, calls ``Op.apply`` and runs
  minigrad's own engine with a random upstream gradient, so only the student's forward/backward are
  under test. The parent compares the output with NumPy (or minigrad, for convolutions) and each
  input's gradient with ``numeric_vjp`` of that reference.
- the engine (part 3): the child builds graphs from *minigrad's* ops (so part 3 never depends on the
  student's parts 1 and 2) and runs the student's ``backward`` on them, with minigrad's own engine
  switched off; the same graph functions, run on NumPy arrays in the parent, give the numeric gradient.
- im2col/col2im: the reference im2col is a minigrad convolution with one-hot kernels; col2im is checked
  as its vector-Jacobian product.

No solution code lives here (students can read this file: `check()` imports it): every expected value
comes from a NumPy formula, a minigrad op in the parent, or central differences.
"""
import numpy as np

from autograder import verdicts as V
from autograder.spec import Assignment, Case, Part, Test, Verdict


def _label(params, skip=("op", "seed", "graph", "upstream")):
    """A case label from its params in Python notation, without the ones the test name already says:
    ``x=(3, 3), dim=1, keepdim=False``."""
    def show(v):
        if isinstance(v, list) and all(isinstance(i, int) for i in v):
            return str(tuple(v))
        return str(v)
    return ", ".join(f"{k}={show(v)}" for k, v in params.items() if k not in skip)


def _cases(*param_dicts):
    return [Case(dict(p), label=_label(p)) for p in param_dicts]


def _dim(d):
    return tuple(d) if isinstance(d, list) else d


# ---- NumPy references (parent; also importable in the child, where they are unused) ------------------
def _softmax(x, dim):
    e = np.exp(x - x.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


def _log_softmax(x, dim):
    s = x - x.max(axis=dim, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=dim, keepdims=True))


#: op -> the names of its tensor inputs, in apply() order
OP_INPUTS = {
    "Mul": ("a", "b"), "Div": ("a", "b"), "Exp": ("x",), "Log": ("x",), "ReLU": ("x",),
    "Sum": ("x",), "MatMul": ("a", "b"), "Reshape": ("x",), "Transpose": ("x",),
    "Softmax": ("x",), "LogSoftmax": ("x",), "cross_entropy": ("logits",),
}


def _reference(case):
    """The reference forward of the case's op, as f(*input arrays) in float64."""
    p = case.params
    op = p["op"]
    if op == "Mul":
        return lambda a, b: a * b
    if op == "Div":
        return lambda a, b: a / b
    if op == "Exp":
        return np.exp
    if op == "Log":
        return np.log
    if op == "ReLU":
        return lambda x: np.maximum(x, 0.0)
    if op == "Sum":
        return lambda x: np.sum(x, axis=_dim(p["dim"]), keepdims=p["keepdim"])
    if op == "MatMul":
        return lambda a, b: a @ b
    if op == "Reshape":
        return lambda x: x.reshape(p["shape"])
    if op == "Transpose":
        return lambda x: np.swapaxes(x, p["dim0"], p["dim1"])
    if op == "Softmax":
        return lambda x: _softmax(x, p["dim"])
    if op == "LogSoftmax":
        return lambda x: _log_softmax(x, p["dim"])
    if op == "cross_entropy":
        t = case["targets"]
        return lambda z: -np.mean(_log_softmax(z, 1)[np.arange(len(t)), t])
    raise KeyError(op)


# ---- parts 1 and 2: ops ---------------------------------------------------------------------------------
def inputs_op(p):
    """Seeded inputs in each op's safe domain (away from log's pole, ReLU's kink, division by ~0)."""
    rng = np.random.default_rng(p["seed"])
    op = p["op"]
    arrays = {}
    for name in OP_INPUTS[op]:
        x = rng.standard_normal(p[name])
        if op == "Log":
            x = np.abs(x) + 0.2
        elif op == "Div" and name == "b":
            x = np.sign(x) * (np.abs(x) + 0.5) + (x == 0)
        elif op == "ReLU":
            x = x + 0.1 * np.where(x >= 0, 1.0, -1.0)
        arrays[name] = x * p.get("scale", 1.0)
    if op == "cross_entropy":
        arrays["targets"] = rng.integers(0, p["logits"][1], size=p["logits"][0])
    case = Case(p, inputs=arrays)
    out = np.asarray(_reference(case)(*[arrays[n] for n in OP_INPUTS[op]]))
    arrays["up"] = rng.standard_normal(out.shape) if op != "cross_entropy" else np.array(1.0)
    return arrays


def _call_op(ns, case, tensors):
    p = case.params
    op = p["op"]
    if op == "Sum":
        return ns.Sum.apply(tensors[0], dim=_dim(p["dim"]), keepdim=p["keepdim"])
    if op == "Reshape":
        return ns.Reshape.apply(tensors[0], shape=tuple(p["shape"]))
    if op == "Transpose":
        return ns.Transpose.apply(tensors[0], dim0=p["dim0"], dim1=p["dim1"])
    if op in ("Softmax", "LogSoftmax"):
        return getattr(ns, op).apply(tensors[0], dim=p["dim"])
    if op == "cross_entropy":
        return ns.cross_entropy(tensors[0], case["targets"].copy())
    return getattr(ns, op).apply(*tensors)


def _run_op(ns, case, names, call):
    """Child: apply the student's op to float64 leaves, then minigrad's engine with the upstream grad."""
    import minigrad as mg
    tensors = [mg.Tensor(case[n].copy(), requires_grad=True) for n in names]
    y = call(tensors)
    if not isinstance(y, mg.Tensor):
        raise TypeError(f"{case.params.get('op', 'the op')} returned a {type(y).__name__}, not a Tensor "
                        f"(call the op through .apply(...))")
    obs = {"y": y.data}
    up = case["up"]
    if tuple(y.shape) == up.shape and y.requires_grad:   # else the forward check explains the problem
        y.backward(mg.Tensor(up.astype(y.data.dtype)))
        for n, t in zip(names, tensors):
            if t.grad is not None:
                obs["d" + n] = t.grad.data
    return obs


def observe_op(ns, case):
    names = OP_INPUTS[case.params["op"]]
    return _run_op(ns, case, names, lambda ts: _call_op(ns, case, ts))


def _check_op(name, case, obs, f, names):
    """Forward against f, then every input's gradient against central differences of f."""
    xs = [case[n] for n in names]
    v = V.compare(f"{name}: forward", obs.get("y"), f(*xs))
    if not v.passed:
        return v
    numeric = V.numeric_vjp(f, xs, case["up"])
    for n, num in zip(names, numeric):
        got = obs.get("d" + n)
        if got is None:
            return Verdict.fail(f"{name}: backward returned no gradient for `{n}` (None)")
        v = v & V.check_gradient(f"{name}: backward", n, got, num)
    return v


def verdict_op(case, obs, ctx):
    op = case.params["op"]
    return _check_op(op, case, obs, _reference(case), OP_INPUTS[op])


def inputs_unbroadcast(p):
    rng = np.random.default_rng(p["seed"])
    return {"grad": rng.standard_normal(p["grad"])}


def observe_unbroadcast(ns, case):
    return {"out": np.asarray(ns.unbroadcast(case["grad"].copy(), tuple(case.params["shape"])))}


def verdict_unbroadcast(case, obs, ctx):
    g = case["grad"]
    shape = tuple(case.params["shape"])
    # unbroadcast is the vector-Jacobian product of broadcasting: differentiate np.broadcast_to numerically
    (expected,) = V.numeric_vjp(lambda s: np.broadcast_to(s, g.shape), [np.zeros(shape)], g)
    return V.compare("unbroadcast(grad, shape)", obs.get("out"), expected)


# ---- part 3: the engine, on graphs of minigrad's ops ------------------------------------------------------
# Each graph function takes an array module `F` (numpy in the parent, minigrad in the child) and arrays
# or Tensors: one definition serves both the student's backward and the numeric reference.
def _g_diamond(F, p, x, w):
    h = F.exp(x * w)                                       # h feeds two paths of different lengths
    return F.sum(F.sin(h) * F.cos(F.exp(h) * w))


def _g_reuse(F, p, x):
    h = F.exp(x)
    return F.sum(x * x * x + h * h)                          # the same input twice in one op


def _g_broadcast(F, p, x, b, c, s):
    return F.sum((x * b + c) / (c * c + 1.0) * s)            # (4,3), (3,), (4,1) and () leaves


def _g_chain(F, p, x):
    y = x
    for k in range(p["n"]):          # thousands of nodes deep; each step is a short and a long path
        y = y + F.sin(y + float(k)) * 0.2       # to the previous y, and the gradient stays O(1)
    return F.sum(y)


def _g_nonscalar(F, p, x, w):
    return F.exp(x) * w - x                                  # a matrix output: backward(y, grad)


GRAPHS = {"diamond": (("x", "w"), _g_diamond), "reuse": (("x",), _g_reuse),
          "broadcast": (("x", "b", "c", "s"), _g_broadcast), "chain": (("x",), _g_chain),
          "nonscalar": (("x", "w"), _g_nonscalar)}


def inputs_graph(p):
    rng = np.random.default_rng(p["seed"])
    names, fn = GRAPHS[p["graph"]]
    arrays = {n: rng.standard_normal(p[n]) * p.get("scale", 1.0) for n in names}
    if p.get("upstream"):
        out = fn(np, p, *[arrays[n] for n in names])
        arrays["up"] = rng.standard_normal(np.shape(out))
    return arrays


class _OwnEngineOnly:
    """Child: while the student's backward runs, minigrad's engine and AccumulateGrad refuse to work."""

    def __enter__(self):
        from minigrad.autograd import engine, function
        self.saved = []

        def refuse(*args, **kwargs):
            raise RuntimeError("your backward() used minigrad's own engine (Tensor.backward, "
                               "mg.autograd.backward/grad or AccumulateGrad.accumulate): part 3 asks you to "
                               "write the engine yourself")
        for owner, attr in ((engine, "run_backward"), (engine, "backward"), (engine, "grad"),
                            (function.AccumulateGrad, "accumulate")):
            if hasattr(owner, attr):
                self.saved.append((owner, attr, getattr(owner, attr)))
                setattr(owner, attr, refuse)
        return self

    def __exit__(self, *exc):
        for owner, attr, value in self.saved:
            setattr(owner, attr, value)
        return False


def _leaves(case, names):
    import minigrad as mg
    return [mg.Tensor(case[n].copy(), requires_grad=True) for n in names]


def _grads(names, leaves):
    return {"d" + n: t.grad.data for n, t in zip(names, leaves) if t.grad is not None}


def observe_engine(ns, case):
    import minigrad as mg
    p = case.params
    names, fn = GRAPHS[p["graph"]]
    leaves = _leaves(case, names)
    out = fn(mg, p, *leaves)
    with _OwnEngineOnly():
        if "up" in case.inputs:
            ns.backward(out, case["up"].copy())
        else:
            ns.backward(out)
    return _grads(names, leaves)


def verdict_engine(case, obs, ctx):
    p = case.params
    names, fn = GRAPHS[p["graph"]]
    xs = [case[n] for n in names]
    up = case.inputs.get("up")
    numeric = V.numeric_vjp(lambda *a: fn(np, p, *a), xs, up)
    v = Verdict.ok()
    for n, num in zip(names, numeric):
        got = obs.get("d" + n)
        if got is None:
            return Verdict.fail(f"backward ({p['graph']} graph): leaf `{n}` has no .grad after backward")
        v = v & V.check_gradient(f"backward ({p['graph']} graph)", n, got, num)
    return v


def _acc_first(F, x, w):
    return F.sum(F.sin(x) * w)


def _acc_second(F, x, w):
    return F.sum(F.exp(x) * w * w)


def inputs_accumulation(p):
    rng = np.random.default_rng(p["seed"])
    return {"x": rng.standard_normal(p["x"]), "w": rng.standard_normal(p["x"])}


def observe_accumulation(ns, case):
    import minigrad as mg
    names = ("x", "w")
    leaves = _leaves(case, names)
    obs = {}
    with _OwnEngineOnly():
        ns.backward(_acc_first(mg, *leaves))
        obs.update({k + "_1": v.copy() for k, v in _grads(names, leaves).items()})
        ns.backward(_acc_second(mg, *leaves))      # a second graph on the same leaves: grads add up
        obs.update({k + "_2": v.copy() for k, v in _grads(names, leaves).items()})
    return obs


def verdict_accumulation(case, obs, ctx):
    xs = [case["x"], case["w"]]
    first = V.numeric_vjp(lambda x, w: _acc_first(np, x, w), xs)
    second = V.numeric_vjp(lambda x, w: _acc_second(np, x, w), xs)
    for step, when in ((1, "after one backward()"),
                       (2, "after a second backward() on another graph, .grad must hold the sum of both "
                           "gradients (add into it, do not assign)")):
        for n, g1, g2 in zip(("x", "w"), first, second):
            got = obs.get(f"d{n}_{step}")
            if got is None:
                return Verdict.fail(f"{when.split(',')[0]}: leaf `{n}` has no .grad")
            v = V.check_gradient("backward", n, got, g1 if step == 1 else g1 + g2)
            if not v.passed:
                return Verdict.fail(f"{when}: {v.message}")
    return Verdict.ok()


def _f_sin_x2(x):
    return np.sum(np.sin(x) * x ** 2)


def _f_logsumexp(x):
    m = np.max(x)
    return m + np.log(np.sum(np.exp(x - m)))


#: name -> (f, its exact gradient)
NUMGRAD_FUNCTIONS = {
    "sin(x)*x^2": (_f_sin_x2, lambda x: np.cos(x) * x ** 2 + 2 * x * np.sin(x)),
    "logsumexp": (_f_logsumexp, lambda x: np.exp(x - _f_logsumexp(x))),
}


def inputs_x(p):
    rng = np.random.default_rng(p["seed"])
    return {"x": rng.standard_normal(p["x"]).astype(p.get("dtype", "float64"))}


def observe_numerical_grad(ns, case):
    p = case.params
    x = case["x"].copy()
    f = NUMGRAD_FUNCTIONS[p["f"]][0]
    g = ns.numerical_grad(f, x, eps=p["eps"]) if "eps" in p else ns.numerical_grad(f, x)
    return {"g": np.asarray(g), "x_after": x}


def verdict_numerical_grad(case, obs, ctx):
    p = case.params
    x = case["x"]
    after = obs.get("x_after")
    if after is None or after.shape != x.shape or not np.array_equal(after, x):
        return Verdict.fail("numerical_grad changed the caller's array x: restore every element after "
                            "perturbing it, or perturb a float64 copy")
    exact = NUMGRAD_FUNCTIONS[p["f"]][1](x.astype(np.float64))
    v = V.compare(f"numerical_grad(f, x) for f = {p['f']}", obs.get("g"), exact, atol=1e-6, rtol=1e-5,
                  what="gradient")
    if not v.passed and x.dtype != np.float64:
        v = Verdict.fail(v.message + f" -- x is {x.dtype}: perturb a float64 copy of it (lecture 01, section 6)")
    return v


# ---- part 4: conv2d via im2col ------------------------------------------------------------------------------
def _conv_ref(x, w, b, stride, padding):
    """Parent: minigrad's own conv2d in float64 (the trusted reference)."""
    import minigrad as mg
    import minigrad.nn.functional as F
    with mg.no_grad():
        y = F.conv2d(mg.Tensor(x), mg.Tensor(w), None if b is None else mg.Tensor(b), stride=stride,
                     padding=padding)
    return y.numpy().astype(np.float64)


def _im2col_ref(x, kh, kw, stride, padding):
    """Parent: im2col as a convolution with one one-hot kernel per column (c, i, j)."""
    C = x.shape[1]
    K = C * kh * kw
    y = _conv_ref(x, np.eye(K).reshape(K, C, kh, kw), None, stride, padding)   # (N, K, OH, OW)
    return y.transpose(0, 2, 3, 1).reshape(-1, K)


def _out(n, k, s, p):
    return (n + 2 * p - k) // s + 1


def _geometry(p):
    N, C, H, W = p["x"]
    kh, kw = p["k"]
    return N, C, H, W, kh, kw, p["stride"], p["padding"]


def inputs_conv(p):
    rng = np.random.default_rng(p["seed"])
    N, C, H, W, kh, kw, s, pad = _geometry(p)
    OH, OW = _out(H, kh, s, pad), _out(W, kw, s, pad)
    out = {"x": rng.standard_normal((N, C, H, W))}
    if "O" in p:
        O = p["O"]
        out.update(w=rng.standard_normal((O, C, kh, kw)), b=rng.standard_normal(O),
                   up=rng.standard_normal((N, O, OH, OW)))
    out["cols"] = rng.standard_normal((N * OH * OW, C * kh * kw))
    return out


def observe_im2col(ns, case):
    N, C, H, W, kh, kw, s, pad = _geometry(case.params)
    return {"cols": np.asarray(ns.im2col(case["x"].copy(), kh, kw, stride=s, padding=pad))}


def verdict_im2col(case, obs, ctx):
    N, C, H, W, kh, kw, s, pad = _geometry(case.params)
    return V.compare("im2col", obs.get("cols"), _im2col_ref(case["x"], kh, kw, s, pad))


def observe_col2im(ns, case):
    N, C, H, W, kh, kw, s, pad = _geometry(case.params)
    return {"dx": np.asarray(ns.col2im(case["cols"].copy(), (N, C, H, W), kh, kw, stride=s, padding=pad))}


def verdict_col2im(case, obs, ctx):
    N, C, H, W, kh, kw, s, pad = _geometry(case.params)
    # col2im is the vector-Jacobian product of im2col: differentiate the reference im2col numerically
    (expected,) = V.numeric_vjp(lambda x: _im2col_ref(x, kh, kw, s, pad), [case["x"]], case["cols"])
    v = V.compare("col2im", obs.get("dx"), expected)
    if not v.passed and obs.get("dx") is not None and obs["dx"].shape == expected.shape:
        v = Verdict.fail(v.message + " (col2im must add every column entry back where im2col copied it "
                                     "from: overlapping windows add up, padding is cropped)")
    return v


def _conv_call(ns, case):
    p = case.params
    return lambda ts: ns.Conv2d.apply(*ts, stride=p["stride"], padding=p["padding"])


def observe_conv_forward(ns, case):
    import minigrad as mg
    x, w, b = (mg.Tensor(case[n].copy()) for n in ("x", "w", "b"))
    y = ns.Conv2d.apply(x, w, b, stride=case.params["stride"], padding=case.params["padding"])
    if not isinstance(y, mg.Tensor):
        raise TypeError(f"Conv2d returned a {type(y).__name__}, not a Tensor (call Conv2d.apply(...))")
    return {"y": y.data}


def verdict_conv_forward(case, obs, ctx):
    p = case.params
    return V.compare("Conv2d: forward", obs.get("y"),
                     _conv_ref(case["x"], case["w"], case["b"], p["stride"], p["padding"]))


def observe_conv_backward(ns, case):
    return _run_op(ns, case, ("x", "w", "b"), _conv_call(ns, case))


def verdict_conv_backward(case, obs, ctx):
    p = case.params
    return _check_op("Conv2d", case, obs, lambda x, w, b: _conv_ref(x, w, b, p["stride"], p["padding"]),
                     ("x", "w", "b"))


# ---- the assignment -----------------------------------------------------------------------------------------
def _op_cases(op, *shapes):
    return _cases(*({"op": op, "seed": i, **s} for i, s in enumerate(shapes)))


def _op_test(op, points, *shapes):
    return Test(op, points, observe_op, verdict_op, inputs_op, cases=_op_cases(op, *shapes), partial=True)


def _graph_test(name, graph, points, *shapes):
    cases = _cases(*({"graph": graph, "seed": 10 + i, **s} for i, s in enumerate(shapes)))
    return Test(name, points, observe_engine, verdict_engine, inputs_graph, cases=cases, partial=True)


CONV_CASES = [
    {"x": [2, 3, 5, 5], "k": [3, 3], "stride": 1, "padding": 0},
    {"x": [2, 3, 5, 5], "k": [3, 3], "stride": 1, "padding": 1},
    {"x": [1, 2, 7, 6], "k": [3, 2], "stride": 2, "padding": 1},
]


def _conv_cases(extra=None):
    return _cases(*({"seed": 30 + i, **c, **(extra or {})} for i, c in enumerate(CONV_CASES)))


FORBIDDEN = [
    # minigrad's own implementations of what this assignment asks for
    r"\bminigrad\s*\.\s*(ops|nn|optim|autograd\s*\.\s*(engine|gradcheck|function))\b",
    r"\bfrom\s+minigrad\s+import\s+[^\n]*\b(ops|nn|optim|functional)\b",
    r"\bfrom\s+minigrad\.autograd\s+import\s+[^\n]*\b(backward|grad|gradcheck|topological_order|engine|"
    r"AccumulateGrad)\b",
    r"\bmg\s*\.\s*(ops|nn|optim)\b",
    r"\b(mg|minigrad)\s*\.\s*autograd\s*\.\s*(backward|grad|gradcheck|topological_order|engine)\b",
    r"\bmg\s*\.\s*(exp|log|sum|mul|div|matmul|mm|bmm|softmax|log_softmax|logsumexp|relu|reshape|transpose|"
    r"permute|conv2d|broadcast_to|expand)\s*\(",
    r"\bF\s*\.\s*(conv2d|cross_entropy|nll_loss|softmax|log_softmax|relu|unfold|fold)\b",
    r"\.\s*(log_softmax|softmax|cross_entropy)\s*\(",
    r"\b(import|from)\s+torch\b",
]

ASSIGNMENT = Assignment(
    id="a1",
    name="a1_autograd",
    title="Autograd: ops, the backward engine, gradient checking, conv2d via im2col",
    notebook="a1_autograd.ipynb",
    solution="solutions/a1_autograd.ipynb",
    preamble=("import numpy as np\nimport minigrad as mg\nfrom minigrad import Tensor\n"
              "from minigrad.autograd import Function\n"),
    timeout=20,
    memory_mb=2048,
    forbidden=FORBIDDEN,
    parts=[
        Part("part1", "Elementwise ops", cells=["a1-mul", "a1-div", "a1-exp", "a1-log", "a1-relu"],
             names=["Mul", "Div", "Exp", "Log", "ReLU"],
             objective="forward and backward of elementwise ops: a backward is a vector-Jacobian product",
             tests=[
                 _op_test("Mul", 4, {"a": [3, 4], "b": [3, 4]}, {"a": [3, 4], "b": [4]}, {"a": [2, 3], "b": []}),
                 _op_test("Div", 4, {"a": [3, 4], "b": [3, 4]}, {"a": [2, 1, 3], "b": [4, 1]}),
                 _op_test("Exp", 4, {"x": [5]}, {"x": [2, 3, 2]}),
                 _op_test("Log", 4, {"x": [5]}, {"x": [3, 4]}),
                 _op_test("ReLU", 4, {"x": [6]}, {"x": [3, 5]}),
             ]),
        Part("part2", "Broadcasting, reductions, matrices, softmax",
             cells=["a1-unbroadcast", "a1-sum", "a1-matmul", "a1-shape", "a1-softmax", "a1-cross-entropy"],
             names=["unbroadcast", "Sum", "MatMul", "Reshape", "Transpose", "Softmax", "LogSoftmax",
                    "cross_entropy"],
             objective="gradients have their input's shape: un-broadcasting, reductions, batched matmul",
             tests=[
                 Test("unbroadcast", 4, observe_unbroadcast, verdict_unbroadcast, inputs_unbroadcast,
                      partial=True, cases=_cases(
                          {"seed": 0, "grad": [2, 3, 4], "shape": [3, 1]},
                          {"seed": 1, "grad": [3, 4], "shape": [4]},
                          {"seed": 2, "grad": [2, 5], "shape": [1, 5]},
                          {"seed": 3, "grad": [3, 2], "shape": []},
                          {"seed": 4, "grad": [2, 3], "shape": [2, 3]})),
                 _op_test("Sum", 5, {"x": [3, 4], "dim": None, "keepdim": False},
                          {"x": [3, 3], "dim": 1, "keepdim": False},
                          {"x": [2, 3, 4], "dim": 0, "keepdim": True},
                          {"x": [2, 3, 4], "dim": [0, 2], "keepdim": False},
                          {"x": [3, 4], "dim": -1, "keepdim": True}),
                 _op_test("MatMul", 5, {"a": [3, 4], "b": [4, 2]}, {"a": [2, 3, 4], "b": [2, 4, 5]},
                          {"a": [2, 3, 4], "b": [4, 2]}),
                 _op_test("Reshape", 2, {"x": [2, 3, 4], "shape": [6, 4]}, {"x": [3, 4], "shape": [2, -1, 3]}),
                 _op_test("Transpose", 2, {"x": [3, 4], "dim0": 0, "dim1": 1},
                          {"x": [2, 3, 4], "dim0": 0, "dim1": 2}),
                 _op_test("Softmax", 4, {"x": [3, 5], "dim": 1}, {"x": [4, 3], "dim": 0},
                          {"x": [2, 4], "dim": -1, "scale": 1000.0}),
                 _op_test("LogSoftmax", 4, {"x": [3, 5], "dim": 1}, {"x": [2, 3, 4], "dim": 1},
                          {"x": [2, 4], "dim": -1, "scale": 1000.0}),
                 _op_test("cross_entropy", 4, {"logits": [5, 4]}, {"logits": [8, 3], "scale": 3.0}),
             ]),
        Part("part3", "The backward engine and a gradient checker", cells=["a1-engine", "a1-numgrad"],
             names=["backward", "numerical_grad"],
             objective="topological order, summing over paths, un-broadcasting, accumulation; central "
                       "differences",
             tests=[
                 _graph_test("engine: diamond", "diamond", 5, {"x": [4], "w": [4], "scale": 0.5},
                             {"x": [2, 3], "w": [3], "scale": 0.5}),
                 _graph_test("engine: reuse", "reuse", 4, {"x": [5]}),
                 _graph_test("engine: broadcasting", "broadcast", 5,
                             {"x": [4, 3], "b": [3], "c": [4, 1], "s": []}),
                 _graph_test("engine: deep chain", "chain", 4, {"x": [3], "n": 1200}),
                 _graph_test("engine: non-scalar output", "nonscalar", 3, {"x": [2, 3], "w": [3], "upstream": True}),
                 Test("engine: accumulation", 4, observe_accumulation, verdict_accumulation, inputs_accumulation,
                      cases=_cases({"seed": 20, "x": [4]}, {"seed": 21, "x": [2, 3]}), partial=True),
                 Test("numerical_grad", 5, observe_numerical_grad, verdict_numerical_grad, inputs_x, partial=True,
                      cases=_cases({"seed": 21, "x": [5], "f": "sin(x)*x^2"},
                                   {"seed": 22, "x": [3, 4], "f": "logsumexp"},
                                   {"seed": 23, "x": [4], "f": "sin(x)*x^2", "dtype": "float32"})),
             ]),
        Part("part4", "conv2d via im2col", cells=["a1-im2col", "a1-conv2d"], names=["im2col", "col2im", "Conv2d"],
             objective="a convolution as one GEMM; its backward as a GEMM plus col2im, the adjoint of im2col",
             tests=[
                 Test("im2col", 5, observe_im2col, verdict_im2col, inputs_conv, cases=_conv_cases(), partial=True),
                 Test("col2im", 5, observe_col2im, verdict_col2im, inputs_conv, cases=_conv_cases(), partial=True),
                 Test("Conv2d forward", 4, observe_conv_forward, verdict_conv_forward, inputs_conv,
                      cases=_conv_cases({"O": 4}), partial=True),
                 Test("Conv2d backward", 6, observe_conv_backward, verdict_conv_backward, inputs_conv,
                      cases=_conv_cases({"O": 3}), partial=True),
             ]),
    ],
)
