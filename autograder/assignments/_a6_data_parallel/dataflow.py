"""Does every number a rank sent or returned follow from what it had? (parent side of a6 part 1)

The ranks of part 1 are threads of one process, so a rank could read the other ranks' inputs from shared
memory and skip the communication. The child records each rank's sends and receives, payloads included, in
the rank's own order; here each rank's *knowledge* is replayed: at first its own input, element by element,
each element tagged with its index and the set of ranks whose inputs it sums (one bit per rank). A number
it sends must be the sum of some of its known numbers of one index whose rank sets do not overlap (a ring
step adds a received partial sum to its own; an all-to-all receiver adds N inputs), and a number it
receives joins its knowledge with the sender's tag. A result element must be derivable the same way. A
value summed from numbers the rank never received is not derivable, whatever the algorithm.
"""
import numpy as np

MAX_SUMS = 16          # achievable sums kept per (index, rank set): values are random, so few collide


class _Knowledge:
    """One rank's achievable sums: for each element index, {rank bitmask: [sums]}; and all of them flat, for
    looking a value up."""

    def __init__(self, x, rank):
        self.sums = [{} for _ in np.ravel(x)]
        self.flat = []                              # (value, index, mask)
        self.arrays = None
        for e, v in enumerate(np.ravel(x)):
            self._keep(e, 1 << rank, float(v))

    def _keep(self, e, mask, value):
        slot = self.sums[e].setdefault(mask, [])
        if len(slot) < MAX_SUMS:
            slot.append(value)
            self.flat.append((value, e, mask))
            self.arrays = None

    def add(self, e, mask, value):
        for m, vals in list(self.sums[e].items()):      # combine with every disjoint sum already reachable
            if m & mask == 0:
                for v in list(vals):
                    self._keep(e, m | mask, v + value)
        self._keep(e, mask, value)

    def explain(self, value):
        """(index, rank mask) of a known sum equal to `value` (up to rounding), or None."""
        if self.arrays is None:
            vals, idx, masks = zip(*self.flat)
            self.arrays = np.array(vals), np.array(idx), np.array(masks)
        vals, idx, masks = self.arrays
        hit = np.flatnonzero(np.abs(vals - value) <= 1e-10 * max(1.0, abs(value)))
        if not len(hit):
            return None
        best = min(hit, key=lambda i: bin(int(masks[i])).count("1"))
        return int(idx[best]), int(masks[best])


def _split(obs, r):
    ops = np.asarray(obs.get(f"ops{r}", np.zeros((0, 3))), dtype=np.int64).reshape(-1, 3)
    vals = np.asarray(obs.get(f"vals{r}", np.zeros(0)), dtype=np.float64)
    if int(ops[:, 2].sum()) != len(vals):
        return None
    out, at = [], 0
    for kind, peer, length in ops:
        out.append((int(kind), int(peer), vals[at:at + length]))
        at += length
    return out


def dataflow(xs, obs):
    """None when every rank's messages and result follow from its input and what it received; else why not.
    `xs`: the ranks' inputs (N, size); `obs`: the child's ``ops{r}``/``vals{r}``/``result{r}`` records."""
    n = len(xs)
    ops = [_split(obs, r) for r in range(n)]
    if any(o is None for o in ops):
        return "the record of the messages is inconsistent"
    know = [_Knowledge(xs[r], r) for r in range(n)]
    queues = {}                        # (src, dst) -> [tags of sent payloads, oldest first]
    at = [0] * n
    progress = True
    while progress:
        progress = False
        for r in range(n):
            while at[r] < len(ops[r]):
                kind, peer, payload = ops[r][at[r]]
                if kind == 0:          # a send: every number must be explainable now
                    tags = []
                    for v in payload:
                        tag = know[r].explain(float(v))
                        if tag is None:
                            return (f"rank {r}'s message #{at[r]} to rank {peer} holds {v:.6g}, which is not a sum "
                                    f"of numbers rank {r} had (its input, what it had received): each rank may "
                                    f"only add up what it received and what it holds")
                        tags.append(tag)
                    queues.setdefault((r, peer), []).append(tags)
                else:                  # a receive: learned with the sender's tags, once the sender sent it
                    sent = queues.get((peer, r))
                    if not sent:
                        break
                    tags = sent.pop(0)
                    if len(tags) != len(payload):
                        return f"rank {r} received from rank {peer} a message that rank {peer} did not send"
                    for v, (e, m) in zip(payload, tags):
                        know[r].add(e, m, float(v))
                at[r] += 1
                progress = True
    if any(at[r] < len(ops[r]) for r in range(n)):
        return "the record of the messages is inconsistent (a receive with no matching send)"
    for r in range(n):
        res = obs.get(f"result{r}")
        for v in np.ravel(res) if res is not None else []:
            if know[r].explain(float(v)) is None:
                return (f"rank {r} returned {v:.6g}, which it cannot have computed from its input and the messages "
                        f"it received: each rank's result must come from its messages")
    return None
