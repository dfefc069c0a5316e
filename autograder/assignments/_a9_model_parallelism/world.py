"""The world an a9 rank runs in (imported in the sandboxed child by the spec's observe functions).

Part 3's ranks get a ``PipeStage`` instead: point-to-point ``send``/``recv``, and the stage's forwards and
backwards recorded by hooks on its module, in the rank's order, for the parent to rebuild the timeline.

Each rank is handed a recorder with only the collectives of its part (part 1 ``all_reduce`` and
``all_gather``, part 2 ``all_gather`` and ``reduce_scatter``), built on the SimWorld's point-to-point
messages: a rank sends its payload (or its chunk) straight to every other rank and adds or concatenates what
it receives in rank order, so every rank gets bit-identical results. The recorder keeps, per rank and in
order, each collective's kind and the array the rank put in; the world logs every message; the parent holds
the two against each other (``comm.py``).
"""
import numpy as np

KINDS = ("all_reduce", "all_gather", "reduce_scatter")


def hidden_rows(params, r):
    """Rank r's slice of part 1's hidden features (``widths[1]`` split evenly over the world)."""
    k = params["widths"][1] // params["world"]
    return slice(r * k, (r + 1) * k)


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
    """Child: run ``rank_fn(comm, rank, mark)`` on every rank of a recorded world, ``comm`` being
    ``comm_cls(world's comm, the rank's trace)`` (``mark()``: forward ends here); (world, each rank's trace,
    marks, results or a deadlock message)."""
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


def _with_results(obs, results):
    """``obs`` with what each rank returned ({name: array} as ``name.rank``), or the deadlock's message."""
    if isinstance(results, str):
        return dict(obs, deadlock=np.array(results))
    for r, res in enumerate(results):
        for k, v in (res or {}).items():
            obs[f"{k}.{r}"] = np.asarray(v, dtype=np.float64)
    return obs


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
    return _with_results(obs, results)


SEND, RECV, FORWARD, BACKWARD = range(4)


class PipeStage:
    """What part 3 hands each rank: its stage (``module``), ``send``/``recv``, the micro-batches' inputs on the
    first stage and their losses on the last. Every send and receive (with its payload) and every forward and
    backward of the module (hooks on it) is appended to the rank's trace, in order."""

    def __init__(self, comm, trace, module, inputs, upstream, rows):
        self.rank, self.size, self.module = comm.rank, comm.size, module
        self._comm, self._trace, self._inputs, self._upstream, self._rows = comm, trace, inputs, upstream, rows
        module.register_forward_hook(lambda *_: trace.append((FORWARD, -1, None)))
        first = next(iter(module.parameters()))
        first.register_post_accumulate_grad_hook(lambda t: trace.append((BACKWARD, -1, None)))

    def send(self, array, dst):
        """Send a copy of ``array`` to rank ``dst`` (returns at once)."""
        a = np.array(array, dtype=np.float64)
        self._trace.append((SEND, int(dst), a.copy()))
        self._comm.send(a, dst)

    def recv(self, src):
        """The next array rank ``src`` sent to this rank (blocks until it arrives)."""
        a = np.array(self._comm.recv(src), dtype=np.float64)
        self._trace.append((RECV, int(src), a.copy()))
        return a

    def input(self, i):
        """Micro-batch ``i``'s input rows (the first stage only)."""
        if self.rank != 0:
            raise ValueError(f"stage.input: only the first stage reads the data (this is stage {self.rank}); "
                             f"the others receive their input from the previous stage")
        return self._inputs[i].copy()

    def loss(self, y, i):
        """Micro-batch ``i``'s loss, a scalar Tensor (the last stage only): backward from it."""
        import minigrad as mg
        if self.rank != self.size - 1:
            raise ValueError(f"stage.loss: only the last stage computes the loss (this is stage {self.rank})")
        return (y * mg.tensor(self._upstream[i])).sum() / self._rows


def pipe_observation(world, traces, results):
    """Each rank's trace (``ops``: kind, peer, payload size; ``vals``: payloads), the world's messages and
    what each rank returned (``name.rank``)."""
    obs = {"messages": np.array(world.messages, dtype=np.int64).reshape(-1, 4)}
    for r, trace in enumerate(traces):
        obs[f"ops{r}"] = np.array([(k, peer, 0 if a is None else a.size) for k, peer, a in trace],
                                  dtype=np.int64).reshape(-1, 3)
        payloads = [a.ravel() for _, _, a in trace if a is not None]
        obs[f"vals{r}"] = np.concatenate(payloads) if payloads else np.zeros(0)
    return _with_results(obs, results)
