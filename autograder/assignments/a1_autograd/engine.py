"""Part 3: the student's backward() on graphs of minigrad's ops, in a child whose minigrad has no engine
(stubs); the same graph functions on NumPy give the numeric gradient (parent). And numerical_grad."""
import numpy as np

from autograder import verdicts as V
from autograder.spec import Verdict


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


def _leaves(case, names):
    import minigrad as mg
    return [mg.Tensor(case[n].copy(), requires_grad=True) for n in names]


def _grads(names, leaves):
    return {"d" + n: t.grad.array for n, t in zip(names, leaves) if t.grad is not None}


def observe_engine(ns, case):
    import minigrad as mg
    p = case.params
    names, fn = GRAPHS[p["graph"]]
    leaves = _leaves(case, names)
    out = fn(mg, p, *leaves)
    if "up" in case.inputs:          # minigrad's engine is a stub in this child (STUBS["part3"])
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
