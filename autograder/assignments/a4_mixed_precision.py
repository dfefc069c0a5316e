"""a4_mixed_precision: the student builds a dynamic loss scaler and float32 master weights, and trains a
float16 model with them.

  part1  LossScaler.scale_loss / update    the scale trace on scripted overflow sequences, exactly
  part2  unscale_(grads, scale)            in place; inf/NaN found; unscaled float16 grads vs float64
  part3  master_step(...)                  skipped steps bit-identical; small updates accumulate
  part4  mixed_forward(...)                bytes saved for backward within 0.55x of float32; gradients
  part5  train(...)                        converges with the scaler where the unscaled run stalls

Every expected value is computed in the parent: the scale trace by minigrad's own ``GradScaler``
(PyTorch's documented rule, checked in tests/amp) driven with the same overflow sequence; gradients by a
float64 NumPy MLP; the float32 saved bytes by a float32 minigrad forward; accuracies from the returned
weights on the test split. No solution code lives here.
"""
import numpy as np

from autograder import verdicts as V
from autograder.spec import Assignment, Case, Part, Test, Verdict

LOSS_WEIGHT = 1e-6
FORBIDDEN = ["minigrad.amp", "minigrad.autocast"]   # GradScaler, master_weights, autocast (mg.autocast too)


# ---- shared parent helpers ----------------------------------------------------------------------------
def _mlp_params(seed, d_in, hidden, classes, scale=0.3):
    r = np.random.default_rng(seed)
    return {"W1": (r.standard_normal((hidden, d_in)) * scale).astype(np.float32),
            "b1": (r.standard_normal(hidden) * 0.1).astype(np.float32),
            "W2": (r.standard_normal((classes, hidden)) * scale).astype(np.float32),
            "b2": (r.standard_normal(classes) * 0.1).astype(np.float32)}


def _mlp_grads64(p, x, y):
    """Loss and gradients of mean cross-entropy(relu(x W1^T + b1) W2^T + b2) in float64."""
    W1, b1, W2, b2 = (p[k].astype(np.float64) for k in ("W1", "b1", "W2", "b2"))
    pre = x @ W1.T + b1
    h = np.maximum(pre, 0)
    z = h @ W2.T + b2
    z = z - z.max(1, keepdims=True)
    lp = z - np.log(np.exp(z).sum(1, keepdims=True))
    n = len(y)
    loss = -lp[np.arange(n), y].mean()
    dz = np.exp(lp)
    dz[np.arange(n), y] -= 1
    dz /= n
    dh = dz @ W2 * (pre > 0)
    return loss, {"W1": dh.T @ x, "b1": dh.sum(0), "W2": dz.T @ h, "b2": dz.sum(0)}


def _rel(got, exp):
    return float(np.linalg.norm(got - exp) / max(np.linalg.norm(exp), 1e-30))


# ---- part 1: the scale trace ----------------------------------------------------------------------------
def inputs_loss(p):
    return {"loss": np.float32(np.random.default_rng(p["seed"]).uniform(0.5, 3.0))}


def observe_scale_loss(ns, case):
    import minigrad as mg
    s = ns.LossScaler(init_scale=case.params["init"])
    loss = mg.tensor(np.float32(case["loss"]), requires_grad=True)
    out = s.scale_loss(loss)
    out.backward()
    return {"value": np.asarray(out.detach().numpy(), np.float64), "grad": np.asarray(loss.grad.numpy(), np.float64)}


def verdict_scale_loss(case, obs, ctx):
    s = case.params["init"]
    return (V.compare("scale_loss(loss)", obs.get("value"), np.float64(np.float32(case["loss"])) * s, rtol=1e-6)
            & V.compare("d scale_loss(loss) / d loss", obs.get("grad"), s, rtol=1e-6, what="gradient"))


def inputs_flags(p):
    if "flags" in p:
        return {"flags": np.asarray(p["flags"], np.int64)}
    r = np.random.default_rng(p["seed"])
    return {"flags": (r.random(p["n"]) < p["rate"]).astype(np.int64)}


def _scaler_kwargs(p):
    return {k: p[k] for k in ("init_scale", "growth_factor", "backoff_factor", "growth_interval") if k in p}


def observe_trace(ns, case):
    s = ns.LossScaler(**_scaler_kwargs(case.params))
    trace = []
    for f in case["flags"]:
        s.update(bool(f))
        trace.append(float(s.scale))
    return {"trace": np.asarray(trace, np.float64)}


def reference_trace(params, flags):
    """minigrad's GradScaler driven with the same overflows (one parameter whose gradient is inf or 1)."""
    import minigrad as mg
    p = mg.nn.Parameter(mg.zeros(1))
    opt = mg.optim.SGD([p], lr=0.0)
    scaler = mg.amp.GradScaler(**_scaler_kwargs(params))
    out = []
    for f in flags:
        p.grad = mg.tensor([np.inf if f else 1.0])
        scaler.step(opt)
        scaler.update()
        out.append(scaler.get_scale())
    return np.asarray(out)


def verdict_trace(case, obs, ctx):
    flags = case["flags"]
    exp = reference_trace(case.params, flags)
    got, msg = V.as_float_array("scale trace", obs.get("trace"))
    if got is None:
        return Verdict.fail(msg)
    if got.shape != exp.shape:
        return Verdict.fail(f"update(): expected {exp.size} scales (one per step), got shape {got.shape}")
    bad = np.flatnonzero(got != exp)
    if bad.size:
        k = int(bad[0])
        before = exp[k - 1] if k else float(case.params.get("init_scale", 2.0 ** 16))
        what = "an overflow (inf/NaN): scale *= backoff_factor, growth_tracker = 0" if flags[k] else \
            "a clean step: growth_tracker += 1, and scale *= growth_factor when it reaches growth_interval"
        return Verdict.fail(f"update(): after step {k} ({what}) the scale is {got[k]:g}, expected {exp[k]:g} "
                            f"(it was {before:g}); overflow steps so far: {np.flatnonzero(flags[:k + 1]).tolist()}")
    return Verdict.ok()


# ---- part 2: unscale ------------------------------------------------------------------------------------
def inputs_grads(p):
    r = np.random.default_rng(p["seed"])
    grads = {f"g{i}": (r.standard_normal(s) * p["scale"]).astype(np.float32) for i, s in enumerate(p["shapes"])}
    bad = p.get("bad")
    if bad is not None:
        i = int(r.integers(len(grads)))
        g = grads[f"g{i}"]
        g.reshape(-1)[int(r.integers(g.size))] = {"inf": np.inf, "-inf": -np.inf, "nan": np.nan}[bad]
    return grads


def observe_unscale(ns, case):
    grads = [np.array(case[f"g{i}"], np.float32) for i in range(len(case.params["shapes"]))]
    found = ns.unscale_(grads, case.params["scale"])
    out = {"found": np.asarray(bool(found)), **{f"g{i}": g for i, g in enumerate(grads)}}
    if case.params.get("bad"):       # finding inf/NaN is credited only to an unscale_ that tells finite apart
        finite = [np.nan_to_num(np.array(case[f"g{i}"], np.float32), nan=1.0, posinf=1.0, neginf=-1.0)
                  for i in range(len(case.params["shapes"]))]
        out["found_when_finite"] = np.asarray(bool(ns.unscale_(finite, case.params["scale"])))
    return out


def verdict_unscale(case, obs, ctx):
    v = Verdict.ok()
    inv = np.float32(1.0 / case.params["scale"])
    for i in range(len(case.params["shapes"])):
        g = obs.get(f"g{i}")
        if g is not None and np.array_equal(g, case[f"g{i}"]):
            return Verdict.fail(f"unscale_: gradient {i} is unchanged after the call: divide the arrays in place "
                                f"(g *= 1 / scale), the optimizer reads those very arrays")
        v = v & V.compare(f"unscale_: gradient {i}", g, case[f"g{i}"] * inv, rtol=1e-6, atol=0)
    if bool(obs.get("found", True)):
        v = v & Verdict.fail("unscale_ returned True (found inf/NaN) for gradients that are all finite")
    return v


def verdict_found_inf(case, obs, ctx):
    bad = case.params.get("bad")
    found = bool(obs.get("found", not bad))
    if bad and bool(obs.get("found_when_finite", True)):
        return Verdict.fail("unscale_ returned True for the same gradients with the inf/NaN replaced by finite "
                            "values: it must find inf/NaN, not report them always")
    if found == bool(bad):
        return Verdict.ok()
    if bad:
        return Verdict.fail(f"unscale_ returned False, but one gradient holds {bad}: check every element with "
                            f"np.isfinite (np.isinf misses NaN)")
    return Verdict.fail("unscale_ returned True for finite gradients")


def inputs_model(p):
    r = np.random.default_rng(p["seed"] + 1)
    out = _mlp_params(p["seed"], p["d"], p["hidden"], p["classes"])
    out["x"] = r.random((p["n"], p["d"])).astype(np.float32)
    out["y"] = r.integers(0, p["classes"], p["n"]).astype(np.int64)
    return out


def observe_unscaled_half_grads(ns, case):
    import minigrad as mg
    import minigrad.nn.functional as F
    ps = [mg.tensor(case[k].astype(np.float16), requires_grad=True) for k in ("W1", "b1", "W2", "b2")]
    h = F.relu(F.linear(mg.tensor(case["x"]).half(), ps[0], ps[1]))
    loss = F.cross_entropy(F.linear(h, ps[2], ps[3]).float(), mg.tensor(case["y"])) * case.params["weight"]
    (loss * case.params["scale"]).backward()
    grads = [p.grad.numpy().astype(np.float32) for p in ps]
    ns.unscale_(grads, case.params["scale"])
    return dict(zip(("W1", "b1", "W2", "b2"), grads))


def verdict_unscaled_half_grads(case, obs, ctx):
    _, ref = _mlp_grads64(case.inputs, case["x"].astype(np.float64), case["y"])
    for k, g in ref.items():
        got = obs.get(k)
        if got is None or got.shape != g.shape:
            return Verdict.fail(f"gradient of {k}: missing or of the wrong shape")
        err = _rel(got.astype(np.float64), g * case.params["weight"])
        if not err < 3e-2:
            return Verdict.fail(f"gradient of {k} after unscale_: relative error {err:.3g} against the float64 "
                                f"gradient (float16 tolerance 3e-2); did you divide by the scale "
                                f"{case.params['scale']:g}?")
    return Verdict.ok()


# ---- part 3: master weights -----------------------------------------------------------------------------
def inputs_master(p):
    r = np.random.default_rng(p["seed"])
    shapes = p["shapes"]
    m = {f"m{i}": (1 + r.standard_normal(s) * 0.1).astype(np.float32) for i, s in enumerate(shapes)}
    g = {f"g{i}": (r.standard_normal(s) * p["grad_scale"]).astype(np.float32) for i, s in enumerate(shapes)}
    if p.get("inf"):
        g["g0"].reshape(-1)[0] = np.inf
    return {**m, **g}


def observe_master(ns, case):
    out = _master_run(ns, case, bool(case.params.get("inf", False)))
    if case.params.get("inf"):       # a skipped step is credited only to a master_step that steps otherwise
        out.update({f"clean_{k}": v for k, v in _master_run(ns, case, False, finite=True).items()})
    return out


def _master_run(ns, case, found_inf, finite=False):
    k = len(case.params["shapes"])
    masters = [np.array(case[f"m{i}"], np.float32) for i in range(k)]
    params = [m.astype(np.float16) for m in masters]
    grads = [np.array(case[f"g{i}"], np.float32) for i in range(k)]
    if finite:
        grads = [np.nan_to_num(g, posinf=1.0, neginf=-1.0) for g in grads]
    for _ in range(case.params["steps"]):
        ns.master_step(params, masters, grads, case.params["lr"], found_inf)
    return {**{f"p{i}": p for i, p in enumerate(params)}, **{f"m{i}": m for i, m in enumerate(masters)}}


def verdict_skip(case, obs, ctx):
    if all(np.array_equal(obs.get(f"clean_m{i}"), case[f"m{i}"]) for i in range(len(case.params["shapes"]))):
        return Verdict.fail("a bit-identical skipped step is credited only to a master_step that updates: with "
                            "found_inf=False (the inf replaced by a finite gradient) the masters did not change either")
    for i in range(len(case.params["shapes"])):
        m0 = case[f"m{i}"]
        for name, exp in ((f"m{i}", m0), (f"p{i}", m0.astype(np.float16))):
            got = obs.get(name)
            if got is None or got.dtype != exp.dtype or got.tobytes() != exp.tobytes():
                kind = "master" if name[0] == "m" else "float16 parameter"
                return Verdict.fail(f"master_step with found_inf=True changed {kind} {i}: a skipped step must "
                                    f"leave parameters and masters bit-identical")
    return Verdict.ok()


def verdict_accumulate(case, obs, ctx):
    p, v = case.params, Verdict.ok()
    for i in range(len(p["shapes"])):
        m = case[f"m{i}"].copy()
        for _ in range(p["steps"]):
            m -= np.float32(p["lr"]) * case[f"g{i}"]
        c = V.compare(f"master {i} after {p['steps']} steps", obs.get(f"m{i}"), m, rtol=1e-6, atol=1e-7)
        if not c.passed:
            c = Verdict.fail(c.message + " -- update the float32 master (m -= lr * g), then round it into the "
                             "float16 array: an update below half a float16 spacing is lost on the float16 copy")
        v = v & c
        got = obs.get(f"p{i}")
        if v.passed and (got is None or got.dtype != np.float16 or not np.array_equal(got, obs[f"m{i}"].astype(np.float16))):
            v = v & Verdict.fail(f"float16 parameter {i} is not the master rounded to float16 (write "
                                 f"p[...] = master after the update, into the same array)")
    return v


# ---- part 4: the mixed-precision forward ----------------------------------------------------------------
def _saved_bytes(loss):
    """Bytes of the arrays the graph behind `loss` keeps for backward: every node's saved tensors (as backward
    will unpack them, whatever saved-tensor hooks did with them) and the arrays a node keeps as attributes
    (``ctx.h = h``), each array once. Read off the graph itself, so no hook of the student's can hide them."""
    seen, stack, arrays = set(), [getattr(loss, "grad_fn", None)], {}
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        try:
            saved = tuple(getattr(node, "saved_tensors", ()) or ())
        except Exception:
            saved = ()
        attrs = [v for k, v in (vars(node).items() if hasattr(node, "__dict__") else ()) if not k.startswith("_")]
        for a in (*saved, *attrs):
            if not isinstance(a, np.ndarray):
                a = getattr(a, "array", a)         # a Tensor kept as an attribute
            if isinstance(a, np.ndarray):
                arrays[id(a)] = a.nbytes
        stack += [e[0] for e in (getattr(node, "next", ()) or ()) if e is not None]
    return sum(arrays.values())


def _forward_inputs(case):
    import minigrad as mg
    ps = [mg.tensor(case[k], requires_grad=True) for k in ("W1", "b1", "W2", "b2")]
    return mg.tensor(case["x"]), mg.tensor(case["y"]), ps


def observe_forward(ns, case):
    x, y, ps = _forward_inputs(case)
    loss = ns.mixed_forward(x, y, *ps)
    nbytes = _saved_bytes(loss)
    loss.backward()
    out = {"bytes": np.asarray(nbytes), "loss": np.asarray(float(loss.item())),
           "loss_dtype": np.asarray(str(loss.dtype))}
    out.update({k: p.grad.numpy() for k, p in zip(("W1", "b1", "W2", "b2"), ps)})
    return out


def verdict_saved_bytes(case, obs, ctx):
    import minigrad.nn.functional as F
    right = verdict_forward_grads(case, obs, ctx)
    if not right.passed:             # a forward that saves little because it computes nothing earns nothing
        return Verdict.fail(f"the saved bytes are credited only to a forward whose loss and gradients are "
                            f"right: {right.message}")
    x, y, ps = _forward_inputs(case)
    ref = _saved_bytes(F.cross_entropy(F.linear(F.relu(F.linear(x, ps[0], ps[1])), ps[2], ps[3]), y))
    budget = 0.55 * ref
    return V.check_budget("bytes saved for backward", float(obs.get("bytes", np.inf)), budget, reference=ref,
                          unit=lambda b: f"{int(b):,} B")


def verdict_forward_grads(case, obs, ctx):
    if str(obs.get("loss_dtype")) != "minigrad.float32":
        return Verdict.fail(f"mixed_forward returned a {obs.get('loss_dtype')} loss: compute cross_entropy on "
                            f"float32 logits (.float()) so the loss and its gradient keep float32's range")
    loss, ref = _mlp_grads64(case.inputs, case["x"].astype(np.float64), case["y"])
    if not abs(float(obs["loss"]) - loss) <= 1e-2 * abs(loss) + 1e-3:
        return Verdict.fail(f"mixed_forward: loss {float(obs['loss']):.5g}, expected {loss:.5g}")
    for k, g in ref.items():
        got = obs.get(k)
        if got is None or got.dtype != np.float32:
            return Verdict.fail(f"gradient of {k} should be float32 (the parameter's dtype), got "
                                f"{None if got is None else got.dtype}")
        err = _rel(got.astype(np.float64), g)
        if not err < 3e-2:
            return Verdict.fail(f"gradient of {k}: relative error {err:.3g} against float64 (tolerance 3e-2)")
    return Verdict.ok()


# ---- part 5: training -----------------------------------------------------------------------------------
def inputs_digits(p):
    from minigrad.datasets import load_digits_arrays
    X, Y = load_digits_arrays("train", flatten=True)
    r = np.random.default_rng(p["seed"])
    out = {"X": X, "Y": Y, "W1": (r.standard_normal((64, 64)) * 0.125).astype(np.float32),
           "b1": np.zeros(64, np.float32), "W2": (r.standard_normal((10, 64)) * 0.125).astype(np.float32),
           "b2": np.zeros(10, np.float32)}
    return out


def observe_train(ns, case):
    out = {}
    for tag, scaler in (("scaled", ns.LossScaler()), ("plain", ns.LossScaler(init_scale=1.0, growth_interval=10 ** 9))):
        init = [np.array(case[k], np.float32) for k in ("W1", "b1", "W2", "b2")]
        masters, scales = ns.train(case["X"], case["Y"], init, case.params["steps"], scaler,
                                   loss_weight=LOSS_WEIGHT, seed=case.params["seed"])
        out.update({f"{tag}_{k}": np.asarray(m) for k, m in zip(("W1", "b1", "W2", "b2"), masters)})
        out[f"{tag}_scales"] = np.asarray(scales, np.float64)
    return out


def _accuracy(obs, tag):
    from minigrad.datasets import load_digits_arrays
    Xt, Yt = load_digits_arrays("test", flatten=True)
    W1, b1, W2, b2 = (np.asarray(obs[f"{tag}_{k}"], np.float64) for k in ("W1", "b1", "W2", "b2"))
    return float(((np.maximum(Xt @ W1.T + b1, 0) @ W2.T + b2).argmax(1) == Yt).mean())


def verdict_train(case, obs, ctx):
    try:
        acc, plain = _accuracy(obs, "scaled"), _accuracy(obs, "plain")
    except (KeyError, ValueError) as e:
        return Verdict.fail(f"train: returned weights are missing or misshapen ({e})")
    note = f"test accuracy {acc:.3f} with the scaler, {plain:.3f} without"
    if acc < 0.9:
        return Verdict.fail(f"train with LossScaler(): {note}; expected at least 0.90 (check the order: scale, "
                            f"backward, widen, unscale_, master_step, update)")
    if plain > 0.5:
        return Verdict.fail(f"train: {note}; without scaling a float16 model of this loss should stall (its "
                            f"gradients underflow): are the forward and backward really float16?")
    return Verdict.ok(note)


# minigrad's loss scaler, master weights and autocast, left out of every part's child (autograder/stubs.py)
STUBS = ["minigrad.amp.grad_scaler", "minigrad.amp.master_weights", "minigrad.amp.autocast_mode.autocast"]

MODEL = {"seed": 0, "n": 16, "d": 12, "hidden": 20, "classes": 5, "weight": 1e-5, "scale": 2.0 ** 16}

ASSIGNMENT = Assignment(
    id="a4",
    name="a4_mixed_precision",
    title="Mixed precision: a dynamic loss scaler and float32 master weights",
    notebook="a4_mixed_precision.ipynb",
    solution="solutions/a4_mixed_precision.ipynb",
    preamble="import numpy as np\nimport minigrad as mg\nimport minigrad.nn.functional as F\n"
             "np.seterr(over='ignore', invalid='ignore')\n",
    timeout=30,
    memory_mb=2048,
    forbidden=FORBIDDEN,
    summary="the scale trace on scripted overflows vs minigrad's GradScaler (exactly); in-place unscale and inf/NaN "
            "detection; unscaled float16 gradients vs float64; skipped steps bit-identical, small updates "
            "accumulating in float32 masters; bytes the graph saves for backward <= 0.55x float32; a float16 digits "
            "model converging with the student's scaler where the unscaled one stalls",
    requirements=["scikit-learn"],      # part 5 trains on the digits, which minigrad.datasets takes from it
    parts=[
        Part("part1", "The dynamic loss scale", cells=["a4-scaler"], names=["LossScaler"], stubs=STUBS,
             objective="scale the loss; grow after growth_interval clean steps, back off on inf/NaN", tests=[
                 Test("scale_loss", 2, observe_scale_loss, verdict_scale_loss, inputs_loss,
                      cases=[{"seed": 0, "init": 65536.0}, {"seed": 1, "init": 3.0}]),
                 Test("scale trace on scripted overflows", 10, observe_trace, verdict_trace, inputs_flags,
                      partial=True, cases=[
                          Case({"flags": [0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 1, 0], "init_scale": 8.0,
                                "growth_interval": 3}, label="13 steps, growth_interval=3"),
                          Case({"seed": 0, "n": 400, "rate": 0.02, "growth_interval": 25}, label="400 steps"),
                          Case({"seed": 1, "n": 60, "rate": 0.2, "init_scale": 1024.0, "growth_factor": 4.0,
                                "backoff_factor": 0.25, "growth_interval": 2}, label="other factors"),
                      ]),
             ]),
        Part("part2", "Unscale and find inf/NaN", cells=["a4-unscale"], names=["unscale_"], stubs=STUBS, tests=[
            Test("unscale in place", 3, observe_unscale, verdict_unscale, inputs_grads,
                 cases=[{"seed": 0, "shapes": [[4, 3], [5]], "scale": 1024.0},
                        {"seed": 1, "shapes": [[2, 3, 2], [7], [1]], "scale": 65536.0}]),
            Test("inf/NaN found", 4, observe_unscale, verdict_found_inf, inputs_grads, partial=True,
                 cases=[Case({"seed": s, "shapes": [[6, 5], [5], [3, 3]], "scale": 512.0, "bad": b},
                             trivial=b is None)      # always False passes the finite case alone
                        for s, b in ((2, "inf"), (3, "-inf"), (4, "nan"), (5, None))]),
            Test("unscaled float16 gradients match float32", 5, observe_unscaled_half_grads,
                 verdict_unscaled_half_grads, inputs_model, cases=[MODEL]),
        ]),
        Part("part3", "Master weights and skipped steps", cells=["a4-master"], names=["master_step"], stubs=STUBS,
             tests=[
            Test("skipped step is bit-identical", 4, observe_master, verdict_skip, inputs_master,
                 cases=[{"seed": 0, "shapes": [[3, 4], [4]], "grad_scale": 1.0, "lr": 0.1, "steps": 1, "inf": True}]),
            Test("small updates accumulate", 6, observe_master, verdict_accumulate, inputs_master,
                 cases=[{"seed": 1, "shapes": [[8], [2, 3]], "grad_scale": 1.0, "lr": 1e-4, "steps": 50},
                        {"seed": 2, "shapes": [[5, 5]], "grad_scale": 3.0, "lr": 0.05, "steps": 1}]),
        ]),
        Part("part4", "A mixed-precision forward", cells=["a4-forward"], names=["mixed_forward"], stubs=STUBS, tests=[
            Test("saved-activation bytes", 4, observe_forward, verdict_saved_bytes, inputs_model,
                 cases=[{**MODEL, "n": 64, "d": 32, "hidden": 64}]),
            Test("loss and gradients", 4, observe_forward, verdict_forward_grads, inputs_model,
                 cases=[{**MODEL, "n": 32}]),
        ]),
        Part("part5", "Train a float16 model", cells=["a4-train"], names=["train"], stubs=STUBS, tests=[
            Test("converges with the scaler, stalls without", 8, observe_train, verdict_train, inputs_digits,
                 cases=[{"seed": 0, "steps": 200}]),
        ]),
    ],
)
