"""Parts 1 and 2: the student's ops under minigrad's engine (child), judged against NumPy references
and float64 central differences (parent)."""
import inspect
import re

import numpy as np

from autograder import verdicts as V
from autograder.spec import Case, Verdict


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
    try:
        y = call(tensors)
        if not isinstance(y, mg.Tensor):
            raise TypeError(f"{case.params.get('op', 'the op')} returned a {type(y).__name__}, not a Tensor "
                            f"(call the op through .apply(...))")
        obs = {"y": y.array}
        up = case["up"]
        if tuple(y.shape) == up.shape and y.requires_grad:   # else the forward check explains the problem
            y.backward(mg.Tensor(up.astype(y.array.dtype)))
            for n, t in zip(names, tensors):
                if t.grad is not None:
                    obs["d" + n] = t.grad.array
    except Exception as e:
        _say_as_written(e, ns)
        raise
    return obs


def _say_as_written(err, ns):
    """minigrad's engine names an op by its ``Function.name`` ("leaky_relu") and an input by its position
    ("input 1"); say both as the student wrote them: the class name and forward's parameter name."""
    from minigrad.autograd import Function
    msg = str(err)
    m = re.match(r"(\w+): ", msg)
    ops = {c.name: c for c in ns._mapping.values()
           if isinstance(c, type) and issubclass(c, Function) and c is not Function}
    cls = ops.get(m.group(1)) if m else None
    if cls is None or len(err.args) != 1:
        return
    try:
        params = list(inspect.signature(cls.forward).parameters)[1:]      # after ctx
    except (TypeError, ValueError):
        params = []

    def name(k):
        i = int(k.group(1))
        return f"`{params[i]}`" if i < len(params) else k.group(0)
    err.args = (cls.__name__ + re.sub(r"\binput (\d+)\b", name, msg[len(m.group(1)):]),)


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
