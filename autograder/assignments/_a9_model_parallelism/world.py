"""The world an a9 rank runs in (imported in the sandboxed child by the spec's observe functions).

Each rank is handed a recorder with only the collectives of its part (part 1 ``all_reduce`` and
``all_gather``, part 2 ``all_gather`` and ``reduce_scatter``), built on the SimWorld's point-to-point
messages: a rank sends its payload (or its chunk) straight to every other rank and adds or concatenates what
it receives in rank order, so every rank gets bit-identical results. The recorder keeps, per rank and in
order, each collective's kind and the array the rank put in; the world logs every message; the parent holds
the two against each other (``comm.py``).
"""
import numpy as np

KINDS = ("all_reduce", "all_gather", "reduce_scatter")


class _Collectives:
    """A rank's collectives over the world's messages: each rank sends its payload (or chunk) straight to
    every other rank and adds or concatenates in rank order, so every rank gets bit-identical results."""

    def __init__(self, comm, trace):
        self.rank, self.size = comm.rank, comm.size
        self._comm, self._trace = comm, trace

    def _record(self, kind, array):
        a = np.array(array, dtype=np.float64)
        self._trace.append((KINDS.index(kind), a.copy()))
        return a

    def _exchange(self, kind, parts):
        c, r = self._comm, self.rank
        for q in range(self.size):
            if q != r:
                c.send(parts[q], q)
        got = [parts[q] if q == r else np.asarray(c.recv(q)) for q in range(self.size)]
        for q, g in enumerate(got):
            if g.shape != parts[r].shape:
                raise ValueError(f"{kind}: rank {r} passed shape {parts[r].shape} but rank {q} {g.shape}: every "
                                 f"rank must run the same collectives, in the same order, on the same shapes")
        return got

    def _all_reduce(self, array):
        a = self._record("all_reduce", array)
        return np.sum(self._exchange("all_reduce", [a] * self.size), axis=0)

    def _all_gather(self, array):
        a = self._record("all_gather", array)
        if a.ndim == 0:
            raise ValueError("all_gather: needs an array with at least one dimension")
        return np.concatenate(self._exchange("all_gather", [a] * self.size), axis=0)

    def _reduce_scatter(self, array):
        a = self._record("reduce_scatter", array)
        if a.ndim == 0 or a.shape[0] % self.size:
            raise ValueError(f"reduce_scatter: axis 0 of an array of shape {a.shape} does not split into "
                             f"{self.size} equal chunks")
        return np.sum(self._exchange("reduce_scatter", np.split(a, self.size)), axis=0)


class TPComm(_Collectives):
    """Part 1's collectives: ``all_reduce`` and ``all_gather``, on NumPy arrays, recorded."""

    def all_reduce(self, array):
        """The sum over all ranks of ``array`` (the same shape on every rank), as a new array."""
        return self._all_reduce(array)

    def all_gather(self, array):
        """Every rank's ``array`` (the same shape on every rank), concatenated along axis 0 in rank order."""
        return self._all_gather(array)


class FSDPComm(_Collectives):
    """Part 2's collectives: ``all_gather`` and ``reduce_scatter``, on NumPy arrays, recorded."""

    def all_gather(self, array):
        """Every rank's ``array`` (the same shape on every rank), concatenated along axis 0 in rank order."""
        return self._all_gather(array)

    def reduce_scatter(self, array):
        """This rank's chunk of the sum over ranks: axis 0 of ``array`` split into ``size`` equal chunks."""
        return self._reduce_scatter(array)


def run_world(n, rank_fn, comm_cls, recorders=None):
    """Child: run ``rank_fn(comm, rank, mark)`` on every rank of a recorded world (``mark()``: forward ends
    here); (world, each rank's recorded collectives, marks, results or a deadlock message)."""
    from minigrad.distributed.simworld import DeadlockError, SimWorld
    traces, marks = [[] for _ in range(n)], [None] * n
    world = SimWorld(n, timeout=5.0)

    def body(c):
        rec = comm_cls(c, traces[c.rank])
        if recorders is not None:
            recorders[c.rank] = rec

        def mark():
            marks[c.rank] = len(traces[c.rank])
        return rank_fn(rec, c.rank, mark)
    try:
        results = world.run(body)
    except DeadlockError as e:
        results = str(e)
    return world, traces, marks, results


def observation(world, traces, marks, results):
    """Each rank's collectives (``ops``: kind and size, ``vals``: payloads, ``dims``: shapes), where its
    forward ended (``mark``), the world's messages and what each rank returned (``name.rank``)."""
    obs = {"messages": np.array(world.messages, dtype=np.int64).reshape(-1, 4)}
    for r, trace in enumerate(traces):
        obs[f"ops{r}"] = np.array([(k, a.size) for k, a in trace], dtype=np.int64).reshape(-1, 2)
        obs[f"vals{r}"] = np.concatenate([a.ravel() for _, a in trace]) if trace else np.zeros(0)
        width = max([a.ndim for _, a in trace] + [1])
        obs[f"dims{r}"] = np.array([list(a.shape) + [-1] * (width - a.ndim) for _, a in trace],
                                   dtype=np.int64).reshape(-1, width)
        obs[f"mark{r}"] = np.asarray(len(trace) if marks[r] is None else marks[r])
    if isinstance(results, str):
        return dict(obs, deadlock=np.array(results))
    for r, res in enumerate(results):
        for k, v in (res or {}).items():
            obs[f"{k}.{r}"] = np.asarray(v, dtype=np.float64)
    return obs
