"""What the ranks of an a9 world communicated, read back in the parent.

The child hands each rank a recorder whose collectives are built on the world's point-to-point messages
(every rank sends its payload, or its chunk, straight to every other rank). It records, per rank and in
order, each collective's kind and the array the rank put in; the world logs every message. Here the two are
held against each other: a rank that moved numbers any other way (the world's ``send`` reached through the
recorder, a message the recorder did not send) is caught, and the part is rejected. Then the verdicts ask
the questions of the lesson: which collectives ran in forward and in backward, how many bytes, and what
each rank put in (the dataflow: a rank's payload must be what *its* shard of the model computes).
"""
import numpy as np

from autograder.spec import Verdict

from .world import KINDS


def ops(obs, r):
    """Rank r's collectives in order: [(kind, payload as a flat float64 array, its shape)]."""
    rows = np.asarray(obs.get(f"ops{r}", np.zeros((0, 2))), dtype=np.int64).reshape(-1, 2)
    vals = np.asarray(obs.get(f"vals{r}", np.zeros(0)), dtype=np.float64).ravel()
    dims = np.asarray(obs.get(f"dims{r}", np.zeros((0, 1))), dtype=np.int64)
    if int(rows[:, 1].sum()) != vals.size or len(dims) != len(rows):
        return None
    out, at = [], 0
    for (kind, size), shape in zip(rows, dims):
        shape = tuple(int(s) for s in shape if s >= 0)
        out.append((KINDS[int(kind)] if 0 <= kind < len(KINDS) else "?", vals[at:at + size], shape))
        at += int(size)
    return out


def phase(obs, r, which):
    """Rank r's collectives in forward (``which=0``) or backward (1) of a one-step case."""
    all_ops = ops(obs, r) or []
    mark = int(np.asarray(obs.get(f"mark{r}", len(all_ops))))
    return all_ops[:mark] if which == 0 else all_ops[mark:]


def describe(seq):
    if not seq:
        return "no collective"
    return ", ".join(f"{k} of {v.size * 8} bytes" for k, v, _ in seq)


def _expected_messages(n, r, seq):
    """The (dst, nbytes) messages rank r's recorded collectives send, in order."""
    out = []
    for kind, payload, _ in seq:
        each = payload.size * 8 // n if kind == "reduce_scatter" else payload.size * 8
        out += [(q, each) for q in range(n) if q != r]
    return out


def check_world(case, obs):
    """None when the world's messages are exactly those of the recorded collectives; else a verdict (a
    deadlock, or tampering that rejects the part)."""
    n = case.params["world"]
    if "deadlock" in obs:
        return Verdict.fail(f"the ranks got stuck: {obs['deadlock']}. Every rank must run the same collectives, "
                            f"in the same order, on arrays of the same shape")
    msgs = np.asarray(obs.get("messages", np.zeros((0, 4))), dtype=np.int64).reshape(-1, 4)
    for r in range(n):
        seq = ops(obs, r)
        if seq is None:
            return Verdict.rejected("the record of the collectives is inconsistent: it was written to by hand")
        sent = [(int(d), int(b)) for s, d, b, _ in msgs if s == r]
        if sent != _expected_messages(n, r, seq):
            return Verdict.rejected(f"rank {r} sent messages that are not those of the collectives it ran "
                                    f"({describe(seq)}): graded code may move numbers between ranks only through "
                                    f"the collectives of the comm it was handed")
    first = [(k, v.size) for k, v, _ in ops(obs, 0)]
    for r in range(1, n):
        if [(k, v.size) for k, v, _ in ops(obs, r)] != first:
            return Verdict.fail(f"rank {r} ran {describe(ops(obs, r))}, rank 0 ran {describe(ops(obs, 0))}: "
                                f"every rank must run the same collectives in the same order")
    return None


def expect_phase(obs, r, which, want, what):
    """A failed verdict when rank r's collectives in forward/backward are not ``want`` [(kind, nbytes)]."""
    got = phase(obs, r, which)
    if [(k, v.size * 8) for k, v, _ in got] == list(want):
        return None
    name = ("forward", "backward")[which]
    wanted = ", ".join(f"{k} of {b} bytes" for k, b in want) or "no collective"
    gathered = [v.size * 8 for k, v, _ in got if k == "all_gather"]
    hint = ""
    if gathered and not any(k == "all_gather" for k, _ in want):
        hint = (f" — an all-gather of {gathered[0]} bytes gathers what should stay split over the ranks: a "
                f"tensor-parallel layer never holds the full weight (N x the memory, and it moves weights "
                f"instead of activations)")
    return Verdict.fail(f"{what}: rank {r} ran {describe(got)} in {name}; expected {wanted}{hint}")


def payload_is(obs, r, which, index, want, what):
    """A failed verdict when the payload of rank r's ``index``-th collective in the phase is not ``want``."""
    got = phase(obs, r, which)[index][1]
    want = np.ravel(want)
    if got.size == want.size and np.allclose(got, want, rtol=1e-9, atol=1e-12):
        return None
    return Verdict.fail(f"{what}: rank {r} put into its {('forward', 'backward')[which]} "
                        f"{phase(obs, r, which)[index][0]} numbers that are not what its own shard computes")
