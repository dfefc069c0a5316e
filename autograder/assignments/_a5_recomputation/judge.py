"""References and judgements for a5 (parent side): every expected value is computed here, from NumPy
formulas or from minigrad's own ``utils.checkpoint`` and ``memory.planner`` run in the parent."""
import functools
import json
import types

import numpy as np

from autograder import verdicts as V
from autograder.spec import Verdict


# ---- the MLP of parts 1 and 2 ---------------------------------------------------------------------------
def mlp_arrays(p):
    rng = np.random.default_rng(p["seed"])
    w = p["widths"]
    out = {"x": rng.standard_normal((p["batch"], w[0]))}
    for i in range(1, len(w)):
        out[f"W{i}"] = rng.standard_normal((w[i], w[i - 1])) / np.sqrt(w[i - 1])
        out[f"b{i}"] = 0.1 * rng.standard_normal(w[i])
    out["up"] = rng.standard_normal((p["batch"], w[-1]))
    return out


def numpy_mlp(p):
    n = len(p["widths"]) - 1

    def f(x, *params):
        h = x
        for i in range(n):
            h = h @ params[2 * i].T + params[2 * i + 1]
            if i < n - 1:
                h = np.tanh(h)
        return h
    return f


# ---- memory traces ----------------------------------------------------------------------------------------
def _spec():
    import sys
    return next(m for name, m in sys.modules.items() if name.endswith("a5_recomputation")
                and hasattr(m, "memory_events"))


def account(obs):
    """(forward bytes still live when the forward ended, peak of live forward bytes) from raw events."""
    ev = np.asarray(obs.get("events", np.zeros((0, 4))), dtype=np.int64)
    if ev.ndim != 2 or ev.shape[1] != 4:
        raise ValueError(f"expected rows of 4 numbers, got shape {ev.shape}")
    forward_end = int(np.asarray(obs.get("forward_end", len(ev))))
    live, total, peak, at_end = {}, 0, 0, None
    for k, (action, address, size, fwd) in enumerate(ev):
        if k == forward_end:
            at_end = total
        if action == 0:
            live[address] = size if fwd else 0
            total += live[address]
        else:
            total -= live.pop(address, 0)
        peak = max(peak, total)
    return (total if at_end is None else at_end), peak


@functools.lru_cache(maxsize=None)
def _reference_memory(params_json):
    from minigrad.utils.checkpoint import checkpoint, checkpoint_sequential
    spec = _spec()
    case = types.SimpleNamespace(params=json.loads(params_json))
    ns = types.SimpleNamespace(checkpoint=checkpoint, checkpoint_sequential=checkpoint_sequential)
    obs = (spec.observe_sequential_memory if "segments" in case.params else spec.observe_checkpoint_memory)(ns, case)
    return (*account(obs), int(np.asarray(obs["outside"])), np.asarray(obs["grads"]))


OUTSIDE_SLACK = 64 * 1024       # Python objects the forward makes (graph nodes, RNG state), not activations


def verdict_memory(case, obs, ctx, budget):
    try:
        kept, peak = account(obs)
    except (ValueError, TypeError) as e:
        return Verdict.fail(f"could not read the memory trace: {e}")
    ref_kept, ref_peak, ref_outside, ref_grads = _reference_memory(json.dumps(case.params, sort_keys=True))
    act = case.params["batch"] * case.params["width"] * 4
    what = "checkpoint_sequential" if "segments" in case.params else "checkpoint"
    grads = np.asarray(obs.get("grads", np.zeros(0)), dtype=np.float64)
    if grads.shape != ref_grads.shape or not np.allclose(grads, ref_grads, rtol=1e-4, atol=1e-6):
        return Verdict.fail(f"{what}: the memory is credited only to a step whose gradients are right, and the "
                            f"weights' gradients after this step's backward differ from the run without "
                            f"checkpointing")
    outside = int(np.asarray(obs.get("outside", np.inf)))
    if outside > ref_outside + OUTSIDE_SLACK:
        return Verdict.fail(
            f"{what}: after the forward, {V.mib(outside)} are held outside minigrad's memory pool ({outside / act:.1f} "
            f"activations of {V.mib(act)}); checkpointing keeps only {V.mib(max(ref_outside, 0))} there. Copies of "
            f"activations kept aside (np.array(t.array), a list of arrays) count too: keep only the inputs")
    if kept > budget * ref_kept + 512:
        return Verdict.fail(
            f"{what}: after the forward, forward ops still hold {V.mib(kept)} ({kept / act:.1f} activations of "
            f"{V.mib(act)}); checkpointing keeps only {V.mib(ref_kept)}. The pack hook must return a small "
            f"handle (an index), not the array, so the activations die after the forward")
    return V.check_budget(f"{what}: peak activation memory", peak, budget * ref_peak + 512, reference=ref_peak)


# ---- the planner -------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _step_lifetimes(kind, seed):
    import minigrad as mg
    from minigrad import nn
    from minigrad.memory import planner
    from minigrad.nn import functional as F
    mg.manual_seed(seed)
    if kind == "mlp":
        model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
        x, y = mg.randn(128, 64), mg.randint(0, 10, (128,))
        loss_fn = lambda: F.cross_entropy(model(x), y)          # noqa: E731
    elif kind == "cnn":
        model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(16 * 7 * 7, 10))
        x, y = mg.randn(16, 1, 14, 14), mg.randint(0, 10, (16,))
        loss_fn = lambda: F.cross_entropy(model(x), y)          # noqa: E731
    else:
        from minigrad.examples.tiny_gpt import TinyGPT, lm_loss
        model = TinyGPT(vocab_size=32, block_size=16, d_model=32, n_layer=2, n_head=4, dropout=0.1)
        idx = mg.randint(0, 32, (4, 17))
        loss_fn = lambda: lm_loss(model(idx[:, :-1]), idx[:, 1:])   # noqa: E731

    def step():
        mg.manual_seed(seed)
        model.zero_grad(set_to_none=True)
        loss_fn().backward()
    step()
    return tuple(planner.record(step).lifetimes)


def _handmade(kind):
    if kind == "known":      # a big tensor alive throughout, two medium ones in turn, a small one across them
        return [(8, 0, 10), (4, 1, 4), (4, 5, 9), (2, 3, 6)]
    if kind == "chain":      # a forward chain, then its backward in reverse
        return [(4, i, 2 * 12 - i) for i in range(12)] + [(2, 12 + i, 14 + i) for i in range(10)]
    return [(16, 0, 40)] + [(s, 2 * s, 2 * s + 3) for s in range(1, 16)] + [(1, i, i + 1) for i in range(40)]


def lifetimes_arrays(p):
    kind = p["kind"]
    if kind in ("mlp", "cnn", "gpt"):
        lts = _step_lifetimes(kind, p["seed"])
        rows = [(lt.size, lt.start, lt.end) for lt in lts]
    elif kind == "random":
        rng = np.random.default_rng(p["seed"])
        rows = []
        for _ in range(p["n"]):
            a = int(rng.integers(0, 200))
            rows.append((512 * int(rng.integers(1, 64)), a, a + int(rng.integers(1, 40))))
    else:
        rows = [(512 * s, a, b) for s, a, b in _handmade(kind)]
    arr = np.array(rows, dtype=np.int64)
    return {"sizes": arr[:, 0], "starts": arr[:, 1], "ends": arr[:, 2]}


def verdict_plan(case, obs, budget):
    from minigrad.memory import planner
    sizes, starts, ends = case["sizes"], case["starts"], case["ends"]
    lts = [planner.Lifetime(i, int(s), int(s), int(a), int(b), f"tensor {i}", None, "op")
           for i, (s, a, b) in enumerate(zip(sizes, starts, ends))]
    offsets = obs.get("offsets")
    if offsets is None or np.shape(offsets) != (len(lts),):
        return Verdict.fail(f"plan_offsets must return one offset per tensor ({len(lts)}), got "
                            f"{'nothing' if offsets is None else np.shape(offsets)}")
    offsets = [int(o) for o in offsets]
    try:
        arena = planner.check_plan(lts, offsets)
    except planner.PlannerError as e:
        return Verdict.fail(str(e).replace("check_plan: ", "plan_offsets: "))
    ref = planner.plan(lts).arena_size
    bound = planner.lower_bound(lts)
    return V.check_budget(f"plan_offsets: arena (lower bound {V.mib(bound)})", arena, budget * ref, reference=ref)
