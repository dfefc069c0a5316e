"""a5_recomputation: activation checkpointing and an offline memory planner, graded on gradients and bytes.

The student writes, in ``solutions/a5_recomputation.ipynb`` (cells by id):

  part1  a5-checkpoint   checkpoint(fn, *args, preserve_rng_state=True) on saved-tensor hooks: saves
                         only the inputs, recomputes in backward, replays the RNG, detects in-place edits
  part2  a5-sequential   checkpoint_sequential(functions, segments, input), PyTorch's segments
  part3  a5-planner      plan_offsets(sizes, starts, ends): greedy-by-size offsets in one arena

How it is judged (the child only runs the student's code and returns arrays):
- gradients: the parent compares the student's checkpointed gradients with float64 central differences
  (``numeric_vjp``) and, exactly, with minigrad's own non-checkpointed run of the same model in the
  parent; with dropout, with the same seed.
- memory: the child runs the step on minigrad's pool with its history on (gc off, so frees happen where
  the program drops references) and returns the raw alloc/free events; the parent computes the bytes
  that forward ops keep alive and their peak, and compares them with the same measurement of minigrad's
  own ``minigrad.utils.checkpoint`` on the same model (budget: 1.1x, plus one 512-byte block).
- segments: the child counts how often each function of the chain runs; the parent knows which must run
  twice (checkpointed segments) and which once (the last segment).
- the planner: the parent records real training steps (``minigrad.memory.planner.record``), sends sizes
  and lifetimes, and checks the returned offsets itself (``planner.check_plan``: alignment, no two
  tensors live at the same time overlap); the arena must be within 1.1x of minigrad's greedy plan.

The spec is imported in the child too: numpy and the autograder package at the top, minigrad only inside
functions. What the child runs is here; the parent-only helpers (references, byte accounting, plan
checks) live in ``_a5_recomputation/``, which the sandbox never receives.
"""
import numpy as np

from autograder import verdicts as V
from autograder.spec import Assignment, Case, Part, Test, Verdict

BUDGET = 1.1


def _cases(*params):
    return [Case(dict(p), label=", ".join(f"{k}={v}" for k, v in p.items() if k not in ("seed", "kind")))
            for p in params]


def _parent():
    """The parent-only helpers (references, byte accounting, plan checks): never imported in the child."""
    from autograder.assignments._a5_recomputation import judge
    return judge


# ---- what the child runs (also the parent, with minigrad's own checkpoint as the reference) --------------
def _names(p):
    return ["x"] + [f"{k}{i}" for i in range(1, len(p["widths"])) for k in ("W", "b")]


def _mlp(tensors, p, dropout=None):
    """tanh MLP on minigrad tensors: the function checkpointed in parts 1 and 2."""
    from minigrad.nn import functional as F
    n = len(p["widths"]) - 1

    def f(x, *params):
        h = x
        for i in range(n):
            h = F.linear(h, params[2 * i], params[2 * i + 1])
            if i < n - 1:
                h = h.tanh()
                if dropout:
                    h = F.dropout(h, dropout, training=True)
        return h
    return f


def run_grads(case, checkpoint, dropout=None):
    """Gradients of sum(f(x, params) * up) with ``checkpoint(f, *inputs)`` (None: a plain call)."""
    import minigrad as mg
    p = case.params
    names = _names(p)
    ts = [mg.tensor(case[n], dtype=mg.float64, requires_grad=not (n == "x" and p.get("const"))) for n in names]
    f = _mlp(ts, p, dropout)
    mg.manual_seed(p["seed"])
    y = f(*ts) if checkpoint is None else checkpoint(f, *ts)
    (y * mg.tensor(case["up"])).sum().backward()
    out = {f"d{n}": (t.grad.numpy() if t.grad is not None else np.zeros(0)) for n, t in zip(names, ts)}
    out["after"] = mg.rand(4, dtype=mg.float64).numpy()
    return out


def run_inplace(ns, case, modify=True):
    """checkpoint(exp, a), then a += 1 before backward: an error, or else the gradient that was computed."""
    import minigrad as mg
    mg.manual_seed(case.params["seed"])
    x = mg.randn(*case.params["shape"], dtype=mg.float64, requires_grad=True)
    a = x * 1.0
    before = a.detach().numpy().copy()
    y = ns.checkpoint(lambda t: t.exp(), a)
    if modify:
        with mg.no_grad():
            a.add_(1.0)
    try:
        y.sum().backward()
    except Exception:
        return {"raised": np.array(1), "before": before}
    return {"raised": np.array(0), "before": before, "dx": x.grad.numpy()}


def _chain(case):
    """The MLP as a list of functions (linear, tanh, linear, ...) and its parameter tensors."""
    import minigrad as mg
    from minigrad.nn import functional as F
    p = case.params
    params = [mg.tensor(case[n], dtype=mg.float64, requires_grad=True) for n in _names(p)[1:]]
    fns = []
    for i in range(len(params) // 2):
        fns.append(lambda h, w=params[2 * i], b=params[2 * i + 1]: F.linear(h, w, b))
        fns.append(lambda h: h.tanh())
    return fns, params


def run_sequential_grads(case, checkpoint_sequential):
    import minigrad as mg
    out = {}
    fns, params = _chain(case)
    for s in range(1, len(fns) + 1):
        x = mg.tensor(case["x"], dtype=mg.float64, requires_grad=True)
        for t in params:
            t.grad = None
        y = checkpoint_sequential(fns, s, x) if checkpoint_sequential else _run(fns, x)
        y.sum().backward()
        for n, t in zip(_names(case.params), [x] + params):
            out[f"s{s}_d{n}"] = t.grad.numpy()
    return out


def _run(fns, x):
    for f in fns:
        x = f(x)
    return x


def run_counts(case, checkpoint_sequential):
    """How often each function of a chain of n runs, for every segment count; and the output and gradient
    (counts are credited only beside a right result: ``checkpoint_sequential=None`` runs it plainly)."""
    import minigrad as mg
    n = case.params["n"]
    mg.manual_seed(n)
    w = mg.randn(4, 4, dtype=mg.float64, requires_grad=True)
    x = mg.randn(2, 4, dtype=mg.float64)
    out = {}
    for s in range(1, n + 1):
        calls = [0] * n

        def fn(h, i):
            calls[i] += 1
            return (h @ w).tanh()
        fns = [lambda h, i=i: fn(h, i) for i in range(n)]
        w.grad = None
        y = checkpoint_sequential(fns, s, x) if checkpoint_sequential else _run(fns, x)
        y.sum().backward()
        out[f"s{s}"] = np.array(calls)
        out[f"y{s}"], out[f"dw{s}"] = y.detach().numpy(), w.grad.numpy()
    return out


def memory_events(case, run_step):
    """Run ``run_step(model_fns, x)`` (forward, returns the output) then backward on minigrad's pool with
    its history on; returns the raw alloc/free events ``[action (0 alloc, 1 free), address, size, forward
    op?]`` and how many of them happened during the forward."""
    import gc
    import minigrad as mg
    import minigrad.memory as mem
    from minigrad.memory import CachingAllocator, CPUSource
    from minigrad.nn import functional as F
    from autograder._guard import meter
    p = case.params
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    source = CPUSource()
    try:
        with mem.enabled("cpu", allocator=CachingAllocator(source, "a5")):
            mg.manual_seed(0)
            weights = [mg.randn(p["width"], p["width"]).mul_(p["width"] ** -0.5).requires_grad_()
                       for _ in range(p["layers"])]
            x = mg.randn(p["batch"], p["width"])
            fns = [f for w in weights for f in (lambda h, w=w: F.linear(h, w), F.relu)]
            mem.record_memory_history(True)
            reserved = source.in_use
            with meter() as m:           # every allocation, the pool's segments and anything outside the pool
                y = run_step(fns, x)
            outside = m.current - (source.in_use - reserved)     # not the pool's segments
            forward_end = len(mem.get_allocator("cpu").history.events)
            y.sum().backward()
            events = list(mem.get_allocator("cpu").history.events)
            grads = np.array([float(w.grad.sum().item()) if w.grad is not None else np.nan for w in weights])
            mem.record_memory_history(False)
    finally:
        if was:
            gc.enable()
    rows = [[0 if e["action"] == "alloc" else 1, e["address"], -(-e["requested"] // 512) * 512,
             int(e["op"] is not None and not e["op"].endswith(".backward"))]
            for e in events if e["action"] in ("alloc", "free")]
    forward_rows = sum(e["action"] in ("alloc", "free") for e in events[:forward_end])
    return {"events": np.array(rows, dtype=np.int64).reshape(-1, 4), "forward_end": np.array(forward_rows),
            "outside": np.array(outside), "grads": grads}


def observe_checkpoint_memory(ns, case):
    return memory_events(case, lambda fns, x: ns.checkpoint(lambda h: _run(fns, h), x))


def observe_sequential_memory(ns, case):
    return memory_events(case, lambda fns, x: ns.checkpoint_sequential(fns, case.params["segments"], x))


# ---- part 1: checkpoint ------------------------------------------------------------------------------
def inputs_mlp(p):
    return _parent().mlp_arrays(p)


def observe_grads(ns, case):
    return run_grads(case, ns.checkpoint)


def verdict_grads(case, obs, ctx):
    names = _names(case.params)
    const = case.params.get("const")
    numeric = V.numeric_vjp(_parent().numpy_mlp(case.params), [case[n] for n in names], case["up"])
    plain = run_grads(case, None)
    out = Verdict.ok()
    for n, num in zip(names, numeric):
        if n == "x" and const:
            continue                        # x does not require grad here
        out = out & V.check_gradient("checkpoint(mlp)", n, obs.get(f"d{n}"), num) & V.compare(
            f"checkpoint(mlp): gradient w.r.t. `{n}`", obs.get(f"d{n}"), plain[f"d{n}"], atol=1e-12, rtol=1e-10,
            what="gradient (vs the run without checkpointing)")
    return out


def observe_dropout(ns, case):
    return run_grads(case, ns.checkpoint, dropout=case.params["p"])


def verdict_dropout(case, obs, ctx):
    plain = run_grads(case, None, dropout=case.params["p"])
    for n in _names(case.params):
        got, want = obs.get(f"d{n}"), plain[f"d{n}"]
        if got is None or np.shape(got) != want.shape or not np.allclose(got, want, rtol=1e-10, atol=1e-12):
            return Verdict.fail(
                f"with dropout (p={case.params['p']}), the gradient w.r.t. `{n}` differs from the run without "
                f"checkpointing: the recomputation drew new dropout masks. Save the RNG state in the forward "
                f"(mg.get_rng_state()) and restore it (mg.set_rng_state) just before recomputing")
    if not np.array_equal(obs.get("after"), plain["after"]):
        return Verdict.fail("the random numbers drawn after backward differ from the run without checkpointing: "
                            "after recomputing, put back the RNG state that was current before it")
    return Verdict.ok()


def verdict_memory(case, obs, ctx):
    return _parent().verdict_memory(case, obs, ctx, BUDGET)


def observe_inplace(ns, case):
    out = run_inplace(ns, case)       # and without the change: raising is credited only beside a right gradient
    out.update({f"plain_{k}": v for k, v in run_inplace(ns, case, modify=False).items()})
    return out


def verdict_inplace(case, obs, ctx):
    plain_before, plain_dx = obs.get("plain_before"), obs.get("plain_dx")
    if plain_dx is None or np.shape(plain_dx) != np.shape(plain_before) or \
            not np.allclose(plain_dx, np.exp(plain_before)):
        return Verdict.fail("detecting an in-place change is credited only to a checkpoint whose backward works "
                            "when nothing changed: checkpoint(exp, a).sum().backward() did not give exp(a) there")
    if int(np.asarray(obs.get("raised", 0))) == 1:
        return Verdict.ok()
    before, dx = obs.get("before"), obs.get("dx")
    if before is not None and dx is not None and np.shape(dx) == np.shape(before) and np.allclose(dx, np.exp(before)):
        return Verdict.ok()                 # nothing was recomputed from the new values
    return Verdict.fail("an input of checkpoint was modified in place between the forward and the backward, and "
                        "backward returned a gradient computed from the new values. Keep each input's _version "
                        "from the forward and raise an error in the recomputation if it changed")


# ---- part 2: checkpoint_sequential ----------------------------------------------------------------------
def observe_sequential(ns, case):
    return run_sequential_grads(case, ns.checkpoint_sequential)


def verdict_sequential(case, obs, ctx):
    plain = run_sequential_grads(case, None)
    out = Verdict.ok()
    for key, expected in plain.items():
        s, g = key.split("_", 1)
        out = out & V.compare(f"checkpoint_sequential (segments={s[1:]})", obs.get(key), expected,
                              atol=1e-12, rtol=1e-10, what=f"gradient `{g}`")
    return out


def observe_counts(ns, case):
    return run_counts(case, ns.checkpoint_sequential)


def verdict_counts(case, obs, ctx):
    n = case.params["n"]
    plain = run_counts(case, None)
    for s in range(1, n + 1):
        for key, what in ((f"y{s}", "output"), (f"dw{s}", "weight gradient")):
            if np.shape(obs.get(key)) != plain[key].shape or not np.allclose(obs[key], plain[key], rtol=1e-10):
                return Verdict.fail(f"checkpoint_sequential with {n} functions in {s} segment(s): the {what} differs "
                                    f"from running the functions one after the other (the counts are credited only "
                                    f"beside a right result)")
        got = obs.get(f"s{s}")
        size = n // s
        expected = np.array([2 if i < size * (s - 1) else 1 for i in range(n)])
        if got is None or np.shape(got) != expected.shape or not np.array_equal(got, expected):
            twice = f"functions 0-{size * (s - 1) - 1} twice (forward + recomputation) and " if s > 1 else ""
            ran = np.asarray(got).tolist() if got is not None else "not at all"
            return Verdict.fail(
                f"checkpoint_sequential with {n} functions in {s} segment(s) must run {twice}functions "
                f"{size * (s - 1)}-{n - 1} once (the last segment is not checkpointed); yours ran them {ran} "
                f"times. Each checkpointed segment holds len(functions) // segments functions, and the last "
                f"segment takes the rest")
    return Verdict.ok()


# ---- part 3: the planner ---------------------------------------------------------------------------------
def inputs_lifetimes(p):
    return _parent().lifetimes_arrays(p)


def observe_plan(ns, case):
    offsets = ns.plan_offsets([int(s) for s in case["sizes"]], [int(a) for a in case["starts"]],
                              [int(b) for b in case["ends"]])
    return {"offsets": np.asarray([int(o) for o in offsets], dtype=np.int64)}


def verdict_plan(case, obs, ctx):
    return _parent().verdict_plan(case, obs, BUDGET)


# minigrad's checkpointing (all of minigrad.utils) and planner, and PyTorch's (dotted names: autograder/forbidden.py)
FORBIDDEN = ["minigrad.utils", "minigrad.memory.planner", "torch"]

# minigrad's checkpointing and planner, left out of every part's child (autograder/stubs.py)
STUBS = ["minigrad.utils.checkpoint", "minigrad.utils._checkpoint.frame", "minigrad.memory.planner"]

MLP = [{"seed": 0, "widths": [5, 6, 4], "batch": 3}, {"seed": 1, "widths": [4, 7, 7, 3], "batch": 2},
       {"seed": 2, "widths": [3, 5, 5, 5, 2], "batch": 4, "const": True}]

ASSIGNMENT = Assignment(
    id="a5",
    name="a5_recomputation",
    title="Recomputation: activation checkpointing, checkpoint_sequential, an offline memory planner",
    notebook="a5_recomputation.ipynb",
    solution="solutions/a5_recomputation.ipynb",
    preamble=("import numpy as np\nimport minigrad as mg\n"
              "from minigrad.autograd.extensions import saved_tensors_hooks\n"),
    timeout=40,
    memory_mb=2048,
    forbidden=FORBIDDEN,
    summary="checkpointed gradients vs central differences and the plain run (dropout replayed, in-place edits "
            "caught); activation bytes from the pool's events and bytes kept outside the pool vs minigrad's "
            "checkpoint (1.1x); checkpoint_sequential's segments; planned offsets checked by the parent (no two live "
            "tensors overlap), the arena within 1.1x of minigrad's plan",
    parts=[
        Part("part1", "checkpoint", cells=["a5-checkpoint"], names=["checkpoint"], stubs=STUBS,
             objective="keep a region's inputs, recompute its activations in backward, replay the RNG",
             tests=[
                 Test("gradients", 5, observe_grads, verdict_grads, inputs_mlp, partial=True, cases=_cases(*MLP)),
                 Test("dropout: RNG replayed", 4, observe_dropout, verdict_dropout, inputs_mlp, partial=True,
                      cases=_cases({"seed": 3, "widths": [6, 8, 8, 3], "batch": 5, "p": 0.5},
                                   {"seed": 4, "widths": [4, 6, 2], "batch": 3, "p": 0.3})),
                 Test("activations are not kept", 4, observe_checkpoint_memory, verdict_memory, partial=True,
                      cases=_cases({"layers": 8, "width": 64, "batch": 32})),
                 Test("in-place change of an input", 2, observe_inplace, verdict_inplace,
                      cases=_cases({"seed": 0, "shape": [3, 4]})),
             ]),
        Part("part2", "checkpoint_sequential", cells=["a5-sequential"], names=["checkpoint_sequential"], stubs=STUBS,
             objective="PyTorch's segments: n // s functions per checkpointed segment, the last runs plainly",
             tests=[
                 Test("gradients, every segment count", 4, observe_sequential, verdict_sequential, inputs_mlp,
                      partial=True, cases=_cases({"seed": 5, "widths": [4, 6, 6, 3], "batch": 3},
                                                 {"seed": 6, "widths": [3, 4, 4, 4, 4, 2], "batch": 2})),
                 Test("segments", 3, observe_counts, verdict_counts, partial=True,
                      cases=_cases({"n": 8}, {"n": 7})),
                 Test("sqrt(n) memory budget", 3, observe_sequential_memory, verdict_memory, partial=True,
                      cases=_cases({"layers": 16, "width": 64, "batch": 64, "segments": 4})),
             ]),
        Part("part3", "An offline memory planner", cells=["a5-planner"], names=["plan_offsets"], stubs=STUBS,
             objective="greedy by size: tensors live at the same time never overlap, the arena stays small",
             tests=[
                 Test("hand-made lifetimes", 3, observe_plan, verdict_plan, inputs_lifetimes, partial=True,
                      cases=_cases({"kind": "known"}, {"kind": "chain"}, {"kind": "nested"})),
                 Test("training steps", 5, observe_plan, verdict_plan, inputs_lifetimes, partial=True,
                      cases=_cases({"kind": "mlp", "seed": 0}, {"kind": "cnn", "seed": 0},
                                   {"kind": "gpt", "seed": 0})),
                 Test("random lifetimes", 2, observe_plan, verdict_plan, inputs_lifetimes, partial=True,
                      cases=_cases({"kind": "random", "seed": 7, "n": 80}, {"kind": "random", "seed": 8, "n": 150})),
             ]),
    ],
)
