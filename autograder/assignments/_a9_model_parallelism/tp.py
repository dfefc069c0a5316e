"""Verdicts of a9 part 1, tensor parallelism (parent): values and gradients against the one-process MLP, the
collectives each rank ran in forward and in backward, and what it put into them (its own shard's partial
sums)."""
import numpy as np

from autograder import verdicts as V
from autograder.spec import Verdict

from . import comm as C
from .reference import mlp
from .world import hidden_rows


def _rows(case, r):
    return hidden_rows(case.params, r)


def values(case, obs, name, want, what, r):
    got = obs.get(f"{name}.{r}")
    if got is not None and np.all(np.isnan(got)) and np.size(want):
        return Verdict.fail(f"rank {r}: {what} is None (no gradient reached it)")
    return V.compare(f"rank {r}: {what}", got, want, atol=1e-9, rtol=1e-9)


def verdict_conjugate(case, obs, ctx):
    bad = C.check_world(case, obs)
    if bad:
        return bad
    op, n, Us = case.params["op"], case.params["world"], case["Us"]
    name = {"f": "CopyToParallel (f)", "g": "ReduceFromParallel (g)"}[op]
    nbytes = Us[0].nbytes
    for r in range(n):
        y_want = case["x"] if op == "f" else case["xs"].sum(0)
        dx_want = Us.sum(0) if op == "f" else Us[r]
        dx = obs.get(f"dx.{r}")
        if op == "f" and dx is not None and np.allclose(dx, Us[r]) and n > 1:
            return Verdict.fail(f"{name}: rank {r}'s x.grad is its own upstream gradient: f's backward must "
                                f"all-reduce (sum) it, since every rank's slice of the next layer adds a gradient "
                                f"to the same replicated input")
        if op == "g" and dx is not None and np.allclose(dx, Us.sum(0)) and n > 1:
            return Verdict.fail(f"{name}: rank {r}'s x.grad is the sum of every rank's upstream gradient: g's "
                                f"backward is the identity (the gradient of a sum w.r.t. each term is the upstream "
                                f"gradient itself)")
        v = values(case, obs, "y", y_want, f"{name} forward", r) & \
            values(case, obs, "dx", dx_want, f"{name} backward: x.grad", r)
        if not v.passed:
            return v
        want = ([], [("all_reduce", nbytes)]) if op == "f" else ([("all_reduce", nbytes)], [])
        for which in (0, 1):
            bad = C.expect_phase(obs, r, which, want[which], name)
            if bad:
                return bad
        carried = Us[r] if op == "f" else case["xs"][r]
        bad = C.payload_is(obs, r, 1 if op == "f" else 0, 0, carried, name)
        if bad:
            return bad
    return Verdict.ok()


def verdict_layer(case, obs, ctx):
    """Column: x (B, d) -> (B, h/N) with W1's rows; row: Uh's columns (B, h/N) -> (B, d) with W1.T's rows."""
    bad = C.check_world(case, obs)
    if bad:
        return bad
    n, col = case.params["world"], case.params["layer"] == "column"
    W, x, Uh = case["W1"], case["x"], case["Uh"]
    name = "ColumnParallelLinear" if col else "RowParallelLinear"
    for r in range(n):
        rows = _rows(case, r)
        if col:
            want = {"y": x @ W[rows].T + case["b1"][rows], "dx": Uh @ W, "dW": Uh[:, rows].T @ x,
                    "db": Uh[:, rows].sum(0)}
            comm_want, carried = ([], [("all_reduce", x.nbytes)]), (1, Uh[:, rows] @ W[rows])
        else:
            partial = Uh[:, rows] @ W[rows]
            want = {"y": Uh @ W + case["bd"], "dx": x @ W[rows].T, "dW": x.T @ Uh[:, rows], "db": x.sum(0)}
            comm_want, carried = ([("all_reduce", x.nbytes)], []), (0, partial)
            got = obs.get(f"y.{r}")
            if got is not None and got.shape == want["y"].shape and n > 1 and \
                    np.allclose(got, Uh @ W + n * case["bd"]):
                return Verdict.fail(f"{name}: rank {r}'s output holds the bias {n} times: add the bias after the "
                                    f"all-reduce (every rank adds its partial sum, and each would add the bias)")
        if col and _only_own_share(obs, r, Uh[:, rows] @ W[rows], n):
            return Verdict.fail(f"{name}: rank {r}'s x.grad holds only its own slice's share of the gradient: "
                                f"the all-reduce in f's backward is missing")
        for key, what in (("y", "forward output"), ("dx", "x.grad"), ("dW", "weight.grad"), ("db", "bias.grad")):
            v = values(case, obs, key, want[key], f"{name} {what}", r)
            if not v.passed:
                return v
        for which in (0, 1):
            bad = C.expect_phase(obs, r, which, comm_want[which], name)
            if bad:
                return bad
        bad = C.payload_is(obs, r, carried[0], 0, carried[1], name)
        if bad:
            return bad
    return Verdict.ok()


def _only_own_share(obs, r, share, n):
    dx = obs.get(f"dx.{r}")
    return n > 1 and dx is not None and dx.shape == share.shape and np.allclose(dx, share)


def verdict_mlp(case, obs, ctx):
    bad = C.check_world(case, obs)
    if bad:
        return bad
    n, x, U = case.params["world"], case["x"], case["U"]
    y, dx, dW1, db1, dW2, db2, h = mlp(x, case["W1"], case["b1"], case["W2"], case["b2"], U)
    for r in range(n):
        rows = _rows(case, r)
        want = {"y": y, "dx": dx, "dW1": dW1[rows], "db1": db1[rows], "dW2": dW2[:, rows], "db2": db2}
        share = ((U @ case["W2"]) * (1 - h ** 2))[:, rows] @ case["W1"][rows]
        if _only_own_share(obs, r, share, n):
            return Verdict.fail(f"the tensor-parallel MLP: rank {r}'s x.grad holds only its own slice's share of the "
                                f"gradient: the all-reduce in f's backward (before the column-parallel layer) is "
                                f"missing")
        for key in want:
            v = values(case, obs, key, want[key], f"the tensor-parallel MLP vs one process: {key}", r)
            if not v.passed:
                return v
        if not np.array_equal(obs[f"y.{r}"], obs["y.0"]):
            return Verdict.fail(f"rank {r}'s output differs from rank 0's in its last bits: every rank must "
                                f"return the all-reduced sum itself")
        for which, want_ops in ((0, [("all_reduce", y.nbytes)]), (1, [("all_reduce", x.nbytes)])):
            bad = C.expect_phase(obs, r, which, want_ops, "the tensor-parallel MLP")
            if bad:
                return bad
        bad = C.payload_is(obs, r, 0, 0, h[:, rows] @ case["W2"][:, rows].T, "the tensor-parallel MLP") or \
            C.payload_is(obs, r, 1, 0, share, "the tensor-parallel MLP")
        if bad:
            return bad
    return Verdict.ok(f"{y.nbytes} bytes all-reduced forward, {x.nbytes} backward, per rank")
