"""Verdicts of a9 part 2, the fully sharded unit (parent): shards, values and gradients against the one-process
model, the all-gathers and reduce-scatters each rank ran and what it put into them, training, and the bytes
still allocated when forward returned."""
import numpy as np

from autograder import verdicts as V
from autograder.spec import Verdict

from . import comm as C
from . import reference as R
from .tp import values as _values


def verdict_shard(case, obs, ctx):
    bad = C.check_world(case, obs)
    if bad:
        return bad
    n = case.params["world"]
    arrays = [case[f"a{k}"] for k in range(len(case.params["shapes"]))]
    flat, k = R.flat_padded(arrays, n)
    for r in range(n):
        got = obs.get(f"shard.{r}")
        if got is not None and np.ndim(got) == 1 and got.size != k:
            return Verdict.fail(f"rank {r}'s shard has {got.size} numbers; pad the flat vector of "
                                f"{sum(a.size for a in arrays)} with {flat.size - sum(a.size for a in arrays)} zeros so "
                                f"that it splits into {n} equal chunks of {k}: every rank's shard has the same length")
        v = V.compare(f"rank {r}: shard_flat", got, flat[r * k:(r + 1) * k], atol=0, rtol=0)
        if not v.passed:
            return v
        bad = C.expect_phase(obs, r, 0, [], "shard_flat")
        if bad:
            return bad
    return Verdict.ok()


def _fsdp_expected(case, r):
    """Rank r's first-step output and x.grad (its own rows' mean loss), the averaged gradient's chunk of each
    unit on rank r (the global mean loss) and rank r's own flat padded gradients, in float64 (parent)."""
    n, B = case.params["world"], case.params["batch"]
    layers = [(case[f"W{k}"], case[f"b{k}"]) for k in range(len(case.params["widths"]) - 1)]
    rows = slice(r * B, (r + 1) * B)
    y, dx, local = R.forward_backward(layers, case["X"][0][rows], case["U"][0][rows])
    _, _, total = R.forward_backward(layers, case["X"][0], case["U"][0])
    chunks = [R.flat_padded(g, n)[0].reshape(n, -1)[r] for g in total]
    return y, dx, chunks, [R.flat_padded(g, n)[0] for g in local]


def verdict_fsdp_forward(case, obs, ctx):
    bad = C.check_world(case, obs)
    if bad:
        return bad
    for r in range(case.params["world"]):
        y, _, _, _ = _fsdp_expected(case, r)
        v = _values(case, obs, "y", y, "FSDPLinear forward", r)
        if not v.passed:
            return v
        shard = case["shards0"][r]
        bad = C.expect_phase(obs, r, 0, [("all_gather", shard.nbytes)], "FSDPLinear forward") or \
            C.payload_is(obs, r, 0, 0, shard, "FSDPLinear forward")
        if bad:
            return bad
    return Verdict.ok()


def verdict_fsdp_backward(case, obs, ctx):
    bad = C.check_world(case, obs)
    if bad:
        return bad
    n = case.params["world"]
    shard = case["shards0"][0]
    for r in range(n):
        _, dx, gshards, local = _fsdp_expected(case, r)
        got = obs.get(f"g0.{r}")
        if got is not None and got.shape == gshards[0].shape and np.allclose(got, n * gshards[0]) and n > 1:
            return Verdict.fail(f"rank {r}: the shard's gradient is {n} x the average: the reduce-scatter sums "
                                f"the ranks' gradients; divide by comm.size")
        v = _values(case, obs, "dx", dx, "FSDPLinear backward: x.grad", r) & \
            _values(case, obs, "g0", gshards[0], "FSDPLinear backward: the shard's gradient", r)
        if not v.passed:
            return v
        seq = C.phase(obs, r, 1)
        if seq and seq[0][0] == "reduce_scatter":
            return Verdict.fail(f"FSDPLinear backward: rank {r} ran {C.describe(seq)}: all-gather the weight "
                                f"again at the start of backward (FSDP frees it after forward)")
        bad = C.expect_phase(obs, r, 1, [("all_gather", shard.nbytes), ("reduce_scatter", shard.nbytes * n)],
                             "FSDPLinear backward")
        if bad:
            return bad
        sent = seq[1][1]
        if not any(np.allclose(sent, local[0] * f, rtol=1e-9, atol=1e-12) for f in (1.0, 1.0 / n)):
            return Verdict.fail(f"FSDPLinear backward: rank {r} reduce-scattered numbers that are not its own "
                                f"gradients of [W.ravel(), b] (zero-padded like the parameters)")
    return Verdict.ok()


def verdict_fsdp_train(case, obs, ctx):
    bad = C.check_world(case, obs)
    if bad:
        return bad
    n, widths = case.params["world"], case.params["widths"]
    L = len(widths) - 1
    layers = [(case[f"W{k}"], case[f"b{k}"]) for k in range(L)]
    for step in range(case.params["steps"]):
        layers = R.sgd_step(layers, case["X"][step], case["U"][step], case.params["lr"])
    sizes = [case[f"shards{k}"][0].nbytes for k in range(L)]
    step_ops = [("all_gather", s) for s in sizes] + \
        [op for s in reversed(sizes) for op in (("all_gather", s), ("reduce_scatter", s * n))]
    for r in range(n):
        got = [(k, v.size * 8) for k, v, _ in C.ops(obs, r)]
        if got != step_ops * case.params["steps"]:
            return Verdict.fail(f"rank {r} ran {C.describe(C.ops(obs, r))}; per step, an FSDP model of {L} units "
                                f"runs {', '.join(f'{k} of {b} bytes' for k, b in step_ops)}")
    for k, (W, b) in enumerate(layers):
        flat, _ = R.flat_padded([W, b], n)
        got = np.concatenate([np.ravel(obs.get(f"s{k}.{r}", np.full(flat.size // n, np.nan))) for r in range(n)])
        v = V.compare(f"unit {k}'s parameters (every rank's shard, concatenated) after {case.params['steps']} SGD "
                      f"steps vs one process on the whole batch", got, flat, atol=1e-9, rtol=1e-9)
        if not v.passed:
            return v
    return Verdict.ok()


def verdict_memory(case, obs, ctx):
    """Credited only to a unit whose gradients are right: a forward that computes nothing keeps nothing."""
    bad = C.check_world(case, obs)
    if bad:
        return bad
    n, (i, o), B = case.params["world"], case.params["widths"], case.params["batch"]
    for r in range(n):
        bad = C.expect_phase(obs, r, 0, [("all_gather", case["shards0"][r].nbytes)], "FSDPLinear forward")
        if bad:
            return Verdict.fail(f"the memory is credited only to a unit that all-gathers its weight: {bad.message}")
        _, _, gshards, _ = _fsdp_expected(case, r)
        v = _values(case, obs, "g0", gshards[0], "the shard's gradient after the measured forward", r)
        if not v.passed:
            return Verdict.fail(f"the memory is credited only to a unit whose gradients are right: {v.message}")
    full = (o * i + o) * 8
    budget = n * (B * o * 8 + full // 2)     # the outputs and the graph; not a full weight per rank
    v = V.check_budget(f"bytes still allocated on {n} ranks when forward returned (their x and shards aside)",
                       float(obs["retained"]), budget, unit=lambda b: f"{int(b):,} B")
    if not v.passed:
        return Verdict.fail(f"{v.message}: each rank's full weight is {full:,} B — free it when forward returns "
                            f"(save only x and the shard, and all-gather the weight again in backward)")
    return v
