"""a3_training_loop: AdamW, the warmup + cosine schedule, clip_grad_norm_, and gradient accumulation that
skips non-finite steps, each graded against a closed form in float64.

  part1  AdamW.step                      updates equal closed-form AdamW (decoupled weight decay) on
                                         scripted gradients to 1e-12; extra memory of the optimizer within
                                         2x the parameter bytes + one parameter-sized workspace
  part2  lr_at, WarmupCosine             every step's learning rate equals the closed form
  part3  clip_grad_norm_                 the global norm ends at max_norm (or below), the direction is kept
  part4  accumulate_step                 micro-batches give the full batch's gradient; a NaN/inf step
                                         leaves the parameters bit-identical and is reported as skipped

The child runs the student's code on arrays the parent built and returns arrays; every expected value is
computed in the parent from the notebook's formulas (no solution code here). A wrong result is also tried
against the usual mistakes (no bias correction, L2 decay, an off-by-one warmup, per-parameter clipping,
unscaled micro-batch losses), and the verdict names the one that matches.
"""
import math

import numpy as np

from autograder import verdicts as V
from autograder.spec import Assignment, Case, Part, Test, Verdict

TOL = dict(rtol=1e-12, atol=1e-12)


# ---- part 1: AdamW ----------------------------------------------------------------------------------------
def inputs_adamw(p):
    rng = np.random.default_rng(p["seed"])
    arrays = {}
    for i, shape in enumerate(p["shapes"]):
        arrays[f"p{i}"] = rng.standard_normal(shape)
        arrays[f"g{i}"] = rng.standard_normal((p["steps"], *shape)) * p.get("grad_scale", 1.0)
    if p.get("zero_grads"):
        for i in range(len(p["shapes"])):
            arrays[f"g{i}"] = np.zeros_like(arrays[f"g{i}"])
    arrays["lrs"] = np.asarray(p.get("lrs", [p["lr"]] * p["steps"]), dtype=np.float64)
    return arrays


def _adamw_reference(p0, grads, lrs, betas, eps, wd, decoupled=True):
    """The trajectory minigrad's own AdamW takes (PyTorch's torch.optim.AdamW), in float64 (parent);
    ``decoupled=False``: minigrad's Adam with L2 weight decay, the usual mistake."""
    import minigrad as mg
    param = mg.tensor(p0.copy(), requires_grad=True)
    cls = mg.optim.AdamW if decoupled else mg.optim.Adam
    opt = cls([param], lr=float(lrs[0]), betas=tuple(betas), eps=eps, weight_decay=wd)
    out = []
    for g, lr in zip(grads, lrs):
        opt.param_groups[0]["lr"] = float(lr)
        param.grad = mg.tensor(np.array(g, dtype=np.float64))
        opt.step()
        out.append(np.array(param.array, dtype=np.float64))
    return np.stack(out)


def observe_adamw(ns, case):
    import minigrad as mg
    p = case.params
    n = len(p["shapes"])
    params = [mg.tensor(case[f"p{i}"].copy(), requires_grad=True) for i in range(n)]
    opt = ns.AdamW(params, lr=float(case["lrs"][0]), betas=tuple(p["betas"]), eps=p["eps"],
                   weight_decay=p["wd"])
    traj = [[] for _ in range(n)]
    for t in range(p["steps"]):
        for group in opt.param_groups:
            group["lr"] = float(case["lrs"][t])
        for i, param in enumerate(params):
            param.grad = mg.tensor(case[f"g{i}"][t].copy())
        opt.step()
        for i, param in enumerate(params):
            traj[i].append(np.array(param.array, dtype=np.float64, copy=True))
    return {f"traj{i}": np.stack(traj[i]) for i in range(n)}


def verdict_adamw(case, obs, ctx):
    p = case.params
    for i in range(len(p["shapes"])):
        args = (case[f"p{i}"], case[f"g{i}"], case["lrs"], p["betas"], p["eps"], p["wd"])
        expected = _adamw_reference(*args)
        got = np.asarray(obs.get(f"traj{i}"))
        v = V.compare(f"AdamW.step, parameter {i}", got, expected, what="parameter", **TOL)
        if v.passed:
            continue
        if got.shape != expected.shape:
            return Verdict.fail(f"AdamW.step, parameter {i}: {len(expected)} steps of shape "
                                f"{tuple(expected.shape[1:])} expected, got an array of shape {got.shape}")
        step = _first_bad_step(got, expected)        # the step, then the element within the parameter
        v = V.compare(f"AdamW.step, parameter {i} after step {step + 1} of {len(expected)}", got[step],
                      expected[step], what="parameter", **TOL)
        return Verdict.fail(v.message + _adamw_hint(got, expected, args, step))
    return Verdict.ok()


def _first_bad_step(got, expected):
    bad = ~np.isclose(got, expected, **TOL).reshape(len(got), -1).all(axis=1)
    return int(np.argmax(bad))


def _adamw_hint(got, expected, args, step):
    """Name the usual mistake when the trajectory matches it."""
    p0, grads, lrs, (b1, b2), eps, wd = args
    if np.allclose(got, _adamw_reference(*args, decoupled=False), rtol=1e-9, atol=1e-12):
        return ("; your updates match weight decay added to the gradient (L2, as in Adam): AdamW decays the "
                "parameter directly, p *= 1 - lr * weight_decay, before the Adam step")
    g, lr = grads[0], lrs[0]
    decayed = p0 * (1 - lr * wd)          # step 1 is the decay, then the Adam update
    if step == 0 and np.allclose(got[0] - decayed, -(expected[0] - decayed), rtol=1e-9, atol=1e-12):
        return "; your update has the opposite sign: subtract lr * m_hat / (sqrt(v_hat) + eps)"
    plain = decayed - lr * (1 - b1) * g / (np.sqrt((1 - b2) * g * g) + eps)   # no bias correction
    if step == 0 and np.allclose(got[0], plain, rtol=1e-9, atol=1e-12):
        return ("; your first update matches Adam *without bias correction*: divide m by (1 - beta1**t) and v by "
                "(1 - beta2**t), with t counted from 1 for each parameter")
    return ""


def observe_adamw_memory(ns, case):
    """Peak bytes allocated (tracemalloc counts every NumPy array, minigrad's pool segments included) while
    the optimizer is built and steps, above what existed before: state and temporaries. The grader's meter
    fails the case if the student's code stopped, restarted or reset the measurement."""
    import gc
    import minigrad as mg
    from autograder._guard import meter
    p = case.params
    params = [mg.tensor(case[f"p{i}"].copy(), requires_grad=True) for i in range(len(p["shapes"]))]
    for i, param in enumerate(params):
        param.grad = mg.tensor(case[f"g{i}"][0].copy())
    gc.collect()
    with meter() as m:
        opt = ns.AdamW(params, lr=1e-3, weight_decay=1e-2)
        for _ in range(p["steps"]):
            opt.step()
    return {"peak": np.array(m.peak, dtype=np.int64),
            "nbytes": np.array([param.array.nbytes for param in params], dtype=np.int64)}


SLACK = 64 * 1024   # Python objects around the arrays (dicts, lists, 0-d scalars)


def verdict_adamw_memory(case, obs, ctx):
    sizes = [int(np.prod(s)) * 8 for s in case.params["shapes"]]
    budget = 2 * sum(sizes) + max(sizes) + SLACK
    peak = int(np.asarray(obs.get("peak")))
    msg = (f"extra memory of AdamW over {case.params['steps']} steps: peak {V.mib(peak)}, budget "
           f"{V.mib(budget)} = 2 x {V.mib(sum(sizes))} of parameters (m and v) + one workspace the size of "
           f"the largest parameter ({V.mib(max(sizes))}) + {SLACK // 1024} KiB")
    if peak <= budget:
        return Verdict.ok(msg)
    extra = (peak - 2 * sum(sizes)) / max(sizes)
    return Verdict.fail(msg + f". You use about {extra:.1f} parameter-sized temporaries at once: write into one "
                        f"workspace with out= (np.multiply(g, 1 - beta1, out=w)), update m, v, p in place, and `del` "
                        f"the workspace before the next parameter's (a name keeps its array alive until "
                        f"it is rebound)")


def observe_skip(ns, case):
    import minigrad as mg
    a = mg.tensor(case["p0"].copy(), requires_grad=True)
    b = mg.tensor(case["p1"].copy(), requires_grad=True)
    opt = ns.AdamW([a, b], lr=0.1, weight_decay=0.0)
    a.grad = mg.tensor(case["g0"][0].copy())
    opt.step()
    return {"a": np.array(a.array), "b": np.array(b.array)}


def verdict_skip(case, obs, ctx):
    expected = _adamw_reference(case["p0"], case["g0"][:1], [0.1], (0.9, 0.999), 1e-8, 0.0)[0]
    v = V.compare("AdamW.step, the parameter with a gradient", obs.get("a"), expected, **TOL)
    if not v.passed:
        return v
    if not np.array_equal(np.asarray(obs.get("b")), case["p1"]):
        return Verdict.fail("AdamW.step changed a parameter whose .grad is None: skip it (no state, no decay)")
    return Verdict.ok()


# ---- part 2: warmup + cosine -------------------------------------------------------------------------------
def expected_lrs(base, warmup, total, min_lr, steps):
    """The learning rate at steps 0..steps-1 (parent): minigrad's own ``warmup_cosine`` up to total_steps, then
    min_lr (the handout's schedule stays at min_lr, where PyTorch's cosine would turn back up)."""
    import minigrad as mg
    w = mg.zeros(1, requires_grad=True)
    opt = mg.optim.SGD([w], lr=base)
    sched = mg.optim.lr_scheduler.warmup_cosine(opt, warmup, total, min_lr=min_lr)
    out = []
    for t in range(steps):
        out.append(opt.param_groups[0]["lr"] if t < total else min_lr)
        sched.step()
    return np.array(out, dtype=np.float64)


def observe_lr_at(ns, case):
    p = case.params
    return {"lr": np.array([ns.lr_at(t, p["base"], p["warmup"], p["total"], p["min_lr"])
                            for t in range(p["total"] + 3)], dtype=np.float64)}


def verdict_lr_at(case, obs, ctx):
    p = case.params
    exp = expected_lrs(p["base"], p["warmup"], p["total"], p["min_lr"], p["total"] + 3)
    got = np.asarray(obs.get("lr"))
    v = V.compare("lr_at", got, exp, what="learning rate", **TOL)
    if v.passed or got.shape != exp.shape:
        return v
    t, hint = int(np.argmax(~np.isclose(got, exp, **TOL))), ""      # the first wrong step, named once
    if p["warmup"] and t == 0 and np.isclose(got[0], 0.0):
        hint = "; at step 0 the warmup gives base_lr * 1 / (warmup_steps + 1), not 0 (t counts from 0)"
    elif p["warmup"] and np.isclose(got[t], exp[min(t + 1, len(exp) - 1)], **TOL):
        hint = (f"; that is the rate of step {t + 1}: your schedule runs one step ahead (off by one: the cosine "
                f"starts at t = warmup_steps with the full base_lr)")
    elif p["warmup"] and t and np.isclose(got[t], exp[t - 1], **TOL):
        hint = f"; that is the rate of step {t - 1}: your schedule runs one step behind (off by one)"
    return Verdict.fail(f"lr_at(t={t}, ...) returned {float(got[t])!r}, expected {float(exp[t])!r}{hint}")


def observe_scheduler(ns, case):
    import minigrad as mg
    p = case.params
    ws = [mg.zeros(2, requires_grad=True) for _ in p["bases"]]
    opt = mg.optim.SGD([{"params": [w], "lr": b} for w, b in zip(ws, p["bases"])], lr=p["bases"][0])
    sched = ns.WarmupCosine(opt, warmup_steps=p["warmup"], total_steps=p["total"], min_lr=p["min_lr"])
    lrs = [[g["lr"] for g in opt.param_groups]]
    for _ in range(p["total"] + 2):
        sched.step()
        lrs.append([g["lr"] for g in opt.param_groups])
    return {"lrs": np.array(lrs, dtype=np.float64)}


def verdict_scheduler(case, obs, ctx):
    p = case.params
    exp = np.stack([expected_lrs(b, p["warmup"], p["total"], p["min_lr"], p["total"] + 3) for b in p["bases"]], 1)
    v = V.compare("WarmupCosine (learning rate of each param group after t calls to step())",
                  obs.get("lrs"), exp, what="learning rate", **TOL)
    got = np.asarray(obs.get("lrs"))
    if v.passed or got.shape != exp.shape:
        return v
    if np.allclose(got[:, 1:], got[:, :1]) and len(set(p["bases"])) > 1:
        return Verdict.fail("WarmupCosine: every group got the same lr: scale each group's own initial lr")
    t, g = np.argwhere(~np.isclose(got, exp, **TOL))[0]      # the first wrong step, then the group
    return Verdict.fail(f"WarmupCosine: after {t} call(s) to step(), param group {g} has lr {float(got[t, g])!r}, "
                        f"expected {float(exp[t, g])!r}")


# ---- part 3: clip_grad_norm_ ----------------------------------------------------------------------------------
def inputs_clip(p):
    rng = np.random.default_rng(p["seed"])
    return {f"g{i}": rng.standard_normal(s) * rng.uniform(0.1, 3) for i, s in enumerate(p["shapes"])}


def observe_clip(ns, case):
    out = _clip_run(ns, case, case.params["max_norm"])
    if case.params.get("check", "clip") == "clip":   # leaving small gradients alone is credited only to a clip
        out.update({f"small_{k}": v for k, v in _clip_run(ns, case, 1e-3).items()})   # that clips large ones
    return out


def _clip_run(ns, case, max_norm):
    import minigrad as mg
    n = len(case.params["shapes"])
    params = [mg.zeros(*case[f"g{i}"].shape, dtype=mg.float64, requires_grad=True) for i in range(n)]
    for i, w in enumerate(params):
        w.grad = mg.tensor(case[f"g{i}"].copy())
    arrays = [w.grad.array for w in params]
    total = ns.clip_grad_norm_(params, max_norm)
    out = {f"g{i}": np.array(w.grad.array) for i, w in enumerate(params)}
    out["total"] = np.array(float(total.item() if hasattr(total, "item") else total))
    out["in_place"] = np.array(all(w.grad.array is a for w, a in zip(params, arrays)))
    return out


def verdict_clip(case, obs, ctx):
    p = case.params
    grads = [case[f"g{i}"] for i in range(len(p["shapes"]))]
    norm = math.sqrt(sum(float((g * g).sum()) for g in grads))
    check = p.get("check", "clip")
    if check == "norm":
        got = float(np.asarray(obs.get("total")))
        if math.isclose(got, norm, rel_tol=1e-9):
            return Verdict.ok()
        hint = "; that is the sum of squares: take its square root" if math.isclose(got, norm ** 2, rel_tol=1e-9) \
            else ""
        return Verdict.fail(f"clip_grad_norm_ returned {got!r}, expected the global 2-norm before clipping "
                            f"{norm!r}{hint}")
    got = [np.asarray(obs.get(f"g{i}")) for i in range(len(grads))]
    if any(g.shape != e.shape for g, e in zip(got, grads)):
        return Verdict.fail("clip_grad_norm_ changed the shape of a gradient")
    if check == "in place":
        if not bool(np.asarray(obs.get("in_place"))):
            return Verdict.fail("clip_grad_norm_ replaced the .grad arrays: scale them in place (g *= factor)")
        if all(np.array_equal(g, e) for g, e in zip(got, grads)):
            return Verdict.fail(f"the global norm {norm:.4g} is over max_norm={p['max_norm']}, yet the "
                                f"gradients did not change")
        return Verdict.ok()
    if norm <= p["max_norm"]:
        small = [np.asarray(obs.get(f"small_g{i}")) for i in range(len(grads))]
        if all(g.shape == e.shape and np.array_equal(g, e) for g, e in zip(small, grads)):
            return Verdict.fail("leaving gradients below max_norm untouched is credited only to a clip_grad_norm_ "
                                "that clips: with max_norm=0.001 the same gradients were not changed either")
        if all(np.array_equal(g, e) for g, e in zip(got, grads)):
            return Verdict.ok()
        return Verdict.fail(f"the global norm {norm:.4g} is already below max_norm={p['max_norm']}: the gradients "
                            f"must stay bit-identical")
    scale = p["max_norm"] / norm
    if len(grads) > 1 and not all(np.allclose(g, e * scale, rtol=1e-6) for g, e in zip(got, grads)) and \
            all(np.allclose(g, e * min(1.0, p["max_norm"] / np.linalg.norm(e)), rtol=1e-6) for g, e in zip(got, grads)):
        return Verdict.fail("each parameter's gradient was clipped to max_norm on its own, which changes the "
                            "direction of the update: compute one global norm over all gradients and scale "
                            "*all* of them by max_norm / global norm")
    after = math.sqrt(sum(float((g * g).sum()) for g in got))
    if not (p["max_norm"] * (1 - 1e-4) <= after <= p["max_norm"] * (1 + 1e-9)):
        return Verdict.fail(f"after clipping the global norm is {after:.6g}, expected max_norm={p['max_norm']} "
                            f"(it was {norm:.6g} before)")
    scale = after / norm
    for i, (g, e) in enumerate(zip(got, grads)):
        if not np.allclose(g, e * scale, rtol=1e-9, atol=1e-15):
            return Verdict.fail(f"the direction changed: gradient {i} is not the original times the common "
                                f"factor {scale:.6g}")
    return Verdict.ok()


# ---- part 4: accumulation with non-finite skipping -------------------------------------------------------------
def inputs_accum(p):
    rng = np.random.default_rng(p["seed"])
    n, d = sum(p["sizes"]), p["d"]
    x, y = rng.standard_normal((n, d)), rng.standard_normal(n)
    out = {"x": x, "y": y, "w": rng.standard_normal(d), "b": rng.standard_normal(1)}
    if p.get("poison") is not None:
        out["x_clean"] = x.copy()        # the same micro-batches without the NaN: the step must be taken there
        start = sum(p["sizes"][:p["poison"]])
        x[start, 0] = np.nan if p.get("value", "nan") == "nan" else np.inf
    return out


def _full_batch_grad(x, y, w, b):
    r = x @ w + b[0] - y
    return 2 * x.T @ r / len(y), np.array([2 * r.mean()])


def observe_accum(ns, case):
    out = _accum_run(ns, case, case["x"])
    if "x_clean" in case.inputs:     # skipping is credited only to a step that is taken on finite gradients
        out.update({f"clean_{k}": v for k, v in _accum_run(ns, case, case["x_clean"]).items()})
    return out


def _accum_run(ns, case, x):
    import minigrad as mg
    p = case.params
    w = mg.tensor(case["w"].copy(), requires_grad=True)
    b = mg.tensor(case["b"].copy(), requires_grad=True)
    opt = mg.optim.SGD([w, b], lr=p.get("lr", 0.1))
    micro = [(mg.tensor(xb.copy()), mg.tensor(yb.copy())) for xb, yb in _chunks(x, case["y"], p["sizes"])]
    seen, step = {}, opt.step

    def spy():                         # the parent judges the gradients the optimizer saw
        seen["w"], seen["b"] = np.array(w.grad.array), np.array(b.grad.array)
        step()
    opt.step = spy

    def loss_fn(xb, yb):
        return ((xb @ w + b - yb) ** 2).mean()
    out = ns.accumulate_step([w, b], micro, loss_fn, opt)
    loss, stepped = out
    res = {"w": np.array(w.array), "b": np.array(b.array), "stepped": np.array(bool(stepped)),
           "loss": np.array(float(loss.item() if hasattr(loss, "item") else loss))}
    res.update({f"seen_{k}": v for k, v in seen.items()})
    res["grads_cleared"] = np.array(w.grad is None or not np.any(np.asarray(w.grad.array)))
    return res


def verdict_accum(case, obs, ctx):
    p = case.params
    x, y, w, b = case["x"], case["y"], case["w"], case["b"]
    if p.get("poison") is not None:
        if not bool(np.asarray(obs.get("clean_stepped", False))) or "clean_seen_w" not in obs or \
                np.array_equal(obs.get("clean_w"), w):
            return Verdict.fail("skipping a non-finite step is credited only to an accumulate_step that takes the "
                                "step on finite gradients: on the same micro-batches without the NaN/inf it did "
                                "not call optimizer.step() (or did not return stepped=True)")
        if bool(np.asarray(obs.get("stepped"))) or "seen_w" in obs:
            return Verdict.fail("a micro-batch produced a non-finite gradient, yet the optimizer stepped: check "
                                "every gradient with isfinite before optimizer.step() and skip the step")
        if not (np.array_equal(obs.get("w"), w) and np.array_equal(obs.get("b"), b)):
            return Verdict.fail("the parameters changed on a skipped (non-finite) step: they must stay bit-identical")
        if not bool(np.asarray(obs.get("grads_cleared"))):
            return Verdict.fail("after a skipped step the gradients must be cleared (zero_grad), or the NaN "
                                "would poison the next step")
        return Verdict.ok()
    if "seen_w" not in obs or not bool(np.asarray(obs.get("stepped"))):
        return Verdict.fail("accumulate_step did not call optimizer.step() (or did not return stepped=True) "
                            "on finite gradients")
    gw, gb = _full_batch_grad(x, y, w, b)
    v = V.compare("the accumulated gradient of w", obs["seen_w"], gw, what="gradient", rtol=1e-10, atol=1e-12) & \
        V.compare("the accumulated gradient of b", obs["seen_b"], gb, what="gradient", rtol=1e-10, atol=1e-12)
    if not v.passed:
        k = len(p["sizes"])
        if np.allclose(obs["seen_w"], k * gw, rtol=1e-8):
            return Verdict.fail(v.message + f"; it is {k}x the full batch's: divide each micro-batch's loss by "
                                "the number of micro-batches (by its share of the samples when sizes differ)")
        if len(set(p["sizes"])) > 1:
            eq = sum(x_.T @ (x_ @ w + b[0] - y_) * 2 / len(y_) for x_, y_ in _chunks(x, y, p["sizes"])) / k
            if np.allclose(obs["seen_w"], eq, rtol=1e-8):
                return Verdict.fail(v.message + "; micro-batches of different sizes: weight each one's mean "
                                    "loss by len(micro-batch) / total samples, not by 1 / k")
        return v
    r = x @ w + b[0] - y
    return V.compare("the returned loss (the full batch's mean loss)", obs.get("loss"), np.array((r * r).mean()),
                     what="loss", rtol=1e-10, atol=1e-12) if p.get("check_loss") else Verdict.ok()


def _chunks(x, y, sizes):
    b = np.cumsum([0] + list(sizes))
    return [(x[s:e], y[s:e]) for s, e in zip(b[:-1], b[1:])]


# ---- the assignment -------------------------------------------------------------------------------------------
def _adam(seed, shapes, steps, lr=1e-2, betas=(0.9, 0.999), eps=1e-8, wd=1e-2, **extra):
    return {"seed": seed, "shapes": [list(s) for s in shapes], "steps": steps, "lr": lr, "betas": list(betas),
            "eps": eps, "wd": wd, **extra}


def _c(params, label):
    return Case(params, label=label)


ASSIGNMENT = Assignment(
    id="a3",
    name="a3_training_loop",
    title="The training loop: AdamW, schedules, clipping, accumulation",
    notebook="a3_training_loop.ipynb",
    solution="solutions/a3_training_loop.ipynb",
    preamble="import math\nimport numpy as np\nimport minigrad as mg\n",
    timeout=30,
    memory_mb=2048,
    # Adam*, the schedulers, clipping (nn.utils), PyTorch; mg.optim.SGD and mg.optim.Optimizer stay allowed
    summary="AdamW trajectories vs minigrad's AdamW in float64 (to 1e-12) and its extra memory (the grader's meter); "
            "the warmup + cosine rate at every step vs minigrad's warmup_cosine; global-norm clipping; accumulated "
            "gradients vs the full batch's, and a skipped non-finite step credited only beside finite steps taken",
    forbidden=["minigrad.optim.Adam", "minigrad.optim.AdamW", "minigrad.optim.adam", "minigrad.optim.adam_update",
               "minigrad.optim.lr_scheduler", "minigrad.nn.utils", "torch"],
    parts=[
        Part("part1", "AdamW", cells=["a3-adamw"], names=["AdamW"], stubs=["minigrad.optim.adam"], tests=[
            Test("first step", 2, observe_adamw, verdict_adamw, inputs_adamw, cases=[
                _c(_adam(0, [(3, 4)], 1), "one step, a (3, 4) parameter")]),
            Test("closed-form trajectory", 5, observe_adamw, verdict_adamw, inputs_adamw, partial=True, cases=[
                _c(_adam(1, [(5, 3), (3,)], 6), "6 steps, two parameters"),
                _c(_adam(2, [(4, 4)], 8, betas=(0.8, 0.99), eps=1e-6, wd=0.1,
                         lrs=[0.01, 0.02, 0.03, 0.03, 0.02, 0.01, 0.005, 0.001]), "8 steps, a changing lr"),
                _c(_adam(3, [(2, 3, 2)], 5, grad_scale=1e-5), "tiny gradients (eps matters)")]),
            Test("decoupled weight decay", 2, observe_adamw, verdict_adamw, inputs_adamw, cases=[
                _c(_adam(4, [(6,)], 3, wd=0.5, zero_grads=True), "zero gradients: only the decay acts"),
                _c(_adam(5, [(3, 3)], 4, wd=0.3), "strong decay")]),
            Test("a parameter without gradient", 1, observe_skip, verdict_skip, inputs_adamw, cases=[
                _c(_adam(6, [(4,), (4,)], 1), "grad None")]),
            Test("optimizer memory", 4, observe_adamw_memory, verdict_adamw_memory, inputs_adamw, cases=[
                _c(_adam(7, [(256, 256), (256,), (128, 256)], 3), "3 steps, 768 KiB of parameters")]),
        ]),
        Part("part2", "Warmup + cosine", cells=["a3-schedule"], names=["lr_at", "WarmupCosine"],
             stubs=["minigrad.optim.lr_scheduler"], tests=[
            Test("closed form at every step", 4, observe_lr_at, verdict_lr_at, partial=True, cases=[
                _c({"base": 0.1, "warmup": 5, "total": 30, "min_lr": 0.0}, "warmup 5, total 30"),
                _c({"base": 3e-4, "warmup": 10, "total": 50, "min_lr": 1e-5}, "warmup 10, min_lr 1e-5"),
                _c({"base": 1.0, "warmup": 0, "total": 12, "min_lr": 0.1}, "no warmup")]),
            Test("the scheduler drives the optimizer", 4, observe_scheduler, verdict_scheduler, partial=True, cases=[
                _c({"bases": [0.1, 0.01], "warmup": 3, "total": 12, "min_lr": 0.0}, "two param groups"),
                _c({"bases": [2e-3], "warmup": 0, "total": 8, "min_lr": 1e-4}, "no warmup")]),
        ]),
        Part("part3", "Gradient clipping", cells=["a3-clip"], names=["clip_grad_norm_"],
             stubs=["minigrad.nn.utils.clip_grad"], tests=[
            Test("returns the global norm", 2, observe_clip, verdict_clip, inputs_clip, cases=[
                _c({"seed": 10, "shapes": [[4, 5], [5], [3, 3]], "max_norm": 1.0, "check": "norm"}, "three grads")]),
            Test("clipped to max_norm, direction kept", 4, observe_clip, verdict_clip, inputs_clip, partial=True,
                 cases=[_c({"seed": 11, "shapes": [[4, 5], [5], [3, 3]], "max_norm": 1.0}, "three grads"),
                        _c({"seed": 12, "shapes": [[50], [2, 2]], "max_norm": 0.5}, "one large, one small")]),
            Test("below max_norm: untouched", 1, observe_clip, verdict_clip, inputs_clip, cases=[
                _c({"seed": 13, "shapes": [[3], [2]], "max_norm": 1e3}, "max_norm 1000")]),
            Test("in place", 1, observe_clip, verdict_clip, inputs_clip, cases=[
                _c({"seed": 14, "shapes": [[6, 2]], "max_norm": 0.1, "check": "in place"}, "one grad")]),
        ]),
        Part("part4", "Gradient accumulation", cells=["a3-accum"], names=["accumulate_step"], tests=[
            Test("micro-batches equal the full batch", 5, observe_accum, verdict_accum, inputs_accum, partial=True,
                 cases=[_c({"seed": 20, "sizes": [8, 8, 8, 8], "d": 5}, "4 micro-batches of 8"),
                        _c({"seed": 21, "sizes": [10, 6, 4], "d": 3}, "sizes 10, 6, 4")]),
            Test("a non-finite step is skipped", 4, observe_accum, verdict_accum, inputs_accum, partial=True, cases=[
                _c({"seed": 22, "sizes": [4, 4, 4], "d": 3, "poison": 1}, "NaN in micro-batch 1"),
                _c({"seed": 23, "sizes": [5, 5], "d": 2, "poison": 0, "value": "inf"}, "inf in micro-batch 0")]),
            Test("returns the loss", 1, observe_accum, verdict_accum, inputs_accum, cases=[
                _c({"seed": 24, "sizes": [6, 2], "d": 4, "check_loss": True}, "sizes 6, 2")]),
        ]),
    ],
)
