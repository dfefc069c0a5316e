"""Verdicts of a9 part 3, the 1F1B pipeline (parent).

The child records, per rank and in order, every send and receive (payloads included) and every forward and
backward of the stage's module. Here that record is replayed on a logical clock: a forward costs 1 unit, a
backward 2, and a received message is available only from the time its sender had reached when it sent it.
The replay gives each stage's busy intervals, hence the bubble (1 - busy time / (p x makespan)) and the
activations a stage holds (forwards not yet matched by a backward). A pipeline earns its gradients only when
its stages communicated through their neighbours (each message the value the one-process model has there)
and at least two stages computed at the same time: stages that run one after another score 0.
"""
import numpy as np

from autograder.spec import Verdict

from . import reference as R
from .world import BACKWARD, FORWARD, RECV, SEND

COST = {FORWARD: 1, BACKWARD: 2}


def _ops(obs, r):
    rows = np.asarray(obs.get(f"ops{r}", np.zeros((0, 3))), dtype=np.int64).reshape(-1, 3)
    vals = np.asarray(obs.get(f"vals{r}", np.zeros(0)), dtype=np.float64).ravel()
    if int(rows[:, 2].sum()) != vals.size:
        return None
    out, at = [], 0
    for kind, peer, size in rows:
        out.append((int(kind), int(peer), vals[at:at + size]))
        at += int(size)
    return out


def replay(seqs):
    """Each rank's busy intervals [(start, end, kind)] and the makespan, or None if the record cannot be
    replayed (a receive no send matches)."""
    n = len(seqs)
    t, at, chans, busy = [0.0] * n, [0] * n, {}, [[] for _ in range(n)]
    progress = True
    while progress:
        progress = False
        for r in range(n):
            while at[r] < len(seqs[r]):
                kind, peer, _ = seqs[r][at[r]]
                if kind == RECV:
                    queue = chans.get((peer, r))
                    if not queue:
                        break
                    t[r] = max(t[r], queue.pop(0))
                elif kind == SEND:
                    chans.setdefault((r, peer), []).append(t[r])
                elif kind in COST:
                    busy[r].append((t[r], t[r] + COST[kind], kind))
                    t[r] += COST[kind]
                at[r] += 1
                progress = True
    if any(at[r] < len(seqs[r]) for r in range(n)):
        return None
    return busy, max(t)


def schedule_1f1b(p, r, m):
    warm = min(p - r - 1, m)
    return [FORWARD] * warm + [FORWARD, BACKWARD] * (m - warm) + [BACKWARD] * warm


def _name(seq):
    return "".join("F" if k == FORWARD else "B" for k in seq)


def _reference(case):
    n, m, b = case.params["world"], case.params["micro"], case.params["batch"]
    layers = [(case[f"W{k}"], case[f"b{k}"]) for k in range(n)]
    return R.passes(layers, case["X"], case["U"])


def _messages(case, obs, seqs):
    """None when every rank sent its neighbours exactly the micro-batches' activations / gradients the
    one-process model has there, and received theirs; else a verdict."""
    n, m, b = case.params["world"], case.params["micro"], case.params["batch"]
    hs, gins, _ = _reference(case)
    msgs = np.asarray(obs.get("messages", np.zeros((0, 4))), dtype=np.int64).reshape(-1, 4)
    for r in range(n):
        sent = [(peer, a.size * 8) for kind, peer, a in seqs[r] if kind == SEND]
        if sent != [(int(d), int(nb)) for s, d, nb, _ in msgs if s == r]:
            return Verdict.rejected(f"rank {r} sent messages that are not those its stage recorded: graded code may "
                                    f"move numbers between stages only through stage.send and stage.recv")
    for r in range(n):
        for q, what, want in ((r + 1, "activations", hs[r + 1]), (r - 1, "gradients", gins[r])):
            if not 0 <= q < n:
                continue
            got = [a for kind, peer, a in seqs[r] if kind == SEND and peer == q]
            if len(got) != m:
                return Verdict.fail(f"rank {r} sent {len(got)} messages of {what} to rank {q}; a pipeline sends one "
                                    f"per micro-batch: {m}")
            for i, a in enumerate(got):
                rows = want[i * b:(i + 1) * b]
                if a.size != rows.size or not np.allclose(a, rows.ravel(), rtol=1e-9, atol=1e-12):
                    return Verdict.fail(f"rank {r}'s message #{i} to rank {q} is not micro-batch {i}'s {what} of "
                                        f"stage {r} ({rows.nbytes} bytes): send each micro-batch's, in order")
            heard = sum(1 for kind, peer, _ in seqs[q] if kind == RECV and peer == r)
            if heard != m:
                return Verdict.fail(f"rank {q} received {heard} of the {m} messages rank {r} sent it: every stage "
                                    f"must take its inputs from its neighbour")
        others = sorted({peer for kind, peer, _ in seqs[r] if kind == SEND} - {r - 1, r + 1})
        if others:
            return Verdict.fail(f"rank {r} sent to rank {others[0]}, which is not its neighbour: a stage talks "
                                f"only to the previous and the next stage")
    return None


def checked(case, obs):
    """(seqs, busy, makespan, None) for a record that holds, or (..., a failed verdict)."""
    if "deadlock" in obs:
        return None, None, None, Verdict.fail(
            f"the stages got stuck: {obs['deadlock']}. A stage must send each activation on before it waits for "
            f"a gradient it depends on, and send each input's gradient back")
    seqs = [_ops(obs, r) for r in range(case.params["world"])]
    if any(s is None for s in seqs):
        return None, None, None, Verdict.rejected("the record of the stages was written to by hand")
    bad = _messages(case, obs, seqs)
    run = replay(seqs)
    if bad is None and run is None:
        bad = Verdict.rejected("the record of the stages cannot be replayed: it was written to by hand")
    busy, makespan = run if run else (None, None)
    return seqs, busy, makespan, bad


def _overlap(busy):
    for r, mine in enumerate(busy):
        for q in range(r + 1, len(busy)):
            if any(s < e2 and s2 < e for s, e, _ in mine for s2, e2, _ in busy[q]):
                return True
    return False


def verdict_grads(case, obs, ctx):
    seqs, busy, _, bad = checked(case, obs)
    if bad:
        return Verdict.fail(f"the gradients are credited only to stages that communicate as a pipeline: "
                            f"{bad.message}") if not bad.reject else bad
    if not _overlap(busy):
        return Verdict.fail("no two stages ever computed at the same time: the stages ran one after another. "
                            "Send each micro-batch on as soon as it is done, and start the next one")
    _, _, grads = _reference(case)
    from autograder import verdicts as V
    for r, (dW, db) in enumerate(grads):
        for key, want in (("gW", dW), ("gb", db)):
            v = V.compare(f"stage {r}'s {'weight' if key == 'gW' else 'bias'}.grad vs one process on the whole "
                          f"batch", obs.get(f"{key}.{r}"), want, atol=1e-9, rtol=1e-9)
            if not v.passed:
                return v
    return Verdict.ok()


def verdict_messages(case, obs, ctx):
    _, busy, _, bad = checked(case, obs)
    if bad:
        return bad
    if not _overlap(busy):
        return Verdict.fail("the messages are credited only to a pipeline: no two stages ever computed at the "
                            "same time, they ran one after another")
    return Verdict.ok()


def _gated(case, obs, ctx, what):
    """A failed verdict unless the pipeline's gradients are right: what a do-nothing or sequential schedule
    would get for free (few activations held, no bubble to speak of) is credited only beside them."""
    right = verdict_grads(case, obs, ctx)
    if right.passed or right.reject:
        return None if right.passed else right
    return Verdict.fail(f"{what} is credited only to a pipeline whose gradients are right: {right.message}")


def verdict_order(case, obs, ctx):
    bad = _gated(case, obs, ctx, "the schedule")
    if bad:
        return bad
    seqs, _, _, _ = checked(case, obs)
    n, m = case.params["world"], case.params["micro"]
    for r in range(n):
        got = [kind for kind, _, _ in seqs[r] if kind in COST]
        held = np.cumsum([1 if k == FORWARD else -1 for k in got])
        peak, limit = int(held.max()) if len(held) else 0, min(n - r, m)
        if peak > limit:
            return Verdict.fail(f"stage {r} held {peak} micro-batches' activations at once ({_name(got)}); 1F1B "
                                f"holds at most p - rank = {limit}: after p - rank - 1 warm-up forwards, run the "
                                f"oldest micro-batch's backward after each forward")
        if got != schedule_1f1b(n, r, m):
            return Verdict.fail(f"stage {r} ran {_name(got)}; 1F1B on stage {r} of {n} with {m} micro-batches runs "
                                f"{_name(schedule_1f1b(n, r, m))}")
    return Verdict.ok()


def verdict_bubble(case, obs, ctx):
    bad = _gated(case, obs, ctx, "the bubble")
    if bad:
        return bad
    _, busy, makespan, _ = checked(case, obs)
    n, m = case.params["world"], case.params["micro"]
    bubble = 1 - sum(e - s for b in busy for s, e, _ in b) / (n * makespan)
    theory = (n - 1) / (m + n - 1)
    if abs(bubble - theory) > 1e-9:
        return Verdict.fail(f"the pipeline's bubble is {bubble:.3f} on its timeline (a forward 1 unit, a backward 2, "
                            f"makespan {makespan:g}); 1F1B's is (p-1)/(m+p-1) = {theory:.3f}: a stage waited for work "
                            f"it could have done earlier")
    return Verdict.ok(f"bubble {bubble:.3f} = (p-1)/(m+p-1)")
