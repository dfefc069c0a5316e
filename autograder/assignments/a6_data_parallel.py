"""a6_data_parallel: the student writes a ring all-reduce on send/recv, then bucketed DDP gradient sync.

  part1  ring_all_reduce(comm, x)            reduce-scatter + all-gather around a ring of N ranks
  part2  BucketedDDP(model, comm, cap)       reverse-order buckets, all-reduce launched from
                                             post-accumulate-grad hooks, waited for at the end of backward

Why a recorded in-process world (``minigrad.distributed.SimWorld``: the ranks are threads of the sandboxed
child) and not real MPI processes: the sandbox forbids TCP and would have to host MPICH's process manager,
while a world in one process lets the child return *every message* (source, destination, bytes, order)
and every event (each gradient becoming ready, each all-reduce issued) for the parent to judge. It also
turns a deadlock into an immediate, precise report of which rank waits for which, instead of a child
killed at its wall-clock limit. Part 2 uses the world's own all-reduce (``comm.iall_reduce``), never the
student's part 1, so the parts do not cascade.

Threads share memory, so a rank could read the others' inputs instead of receiving them. That is no
shortcut here: part 1 hands each rank only ``send`` and ``recv`` (``RingComm``; the world's own all-reduce is
a stub in that child), records every payload, and the parent replays each rank's knowledge: every number a
rank sends or returns must be a sum of numbers it had (its input, what it received), or the part fails
(``_a6_data_parallel/dataflow.py``). Part 2 reads the buckets off the payloads the all-reduces carried and
requires the gradients to be the all-reduced averages (``_a6_data_parallel/ddp.py``); a log of events that
disagrees with the payloads rejects the part.

Expected values come from NumPy in the parent: sums of the inputs, byte counts of the ring's cost model
2(N-1)/N x size, bucket assignments by minigrad's own ``assign_buckets``, and gradients by float64 central
differences (the grader's ``numeric_vjp``) of the global mean loss of a small tanh MLP.
"""
import itertools

import numpy as np

from autograder import verdicts as V
from autograder.spec import Assignment, Case, Part, Test, Verdict

LR = 0.1


# ---- part 1: the ring --------------------------------------------------------------------------------------
def inputs_ring(p):
    rng = np.random.default_rng(p["seed"])
    return {"xs": rng.standard_normal((p["world"], p["size"]))}


def _world_run(fn, n, args, timeout=3.0):
    """Child: run ``fn`` on a SimWorld of n ranks; (world, results) or (world, deadlock message)."""
    from minigrad.distributed.simworld import DeadlockError, SimWorld
    world = SimWorld(n, timeout=timeout)
    try:
        return world, world.run(fn, args)
    except DeadlockError as e:
        return world, str(e)


class RingComm:
    """What part 1 hands each rank: its rank, the world size, send and recv, nothing else (the world's own
    all-reduce is a stub in this part's child too). Every payload is recorded, in the rank's own order, so
    the parent can check that what the rank sent and returned follows from what it had received."""

    def __init__(self, comm, trace):
        self.rank, self.size = comm.rank, comm.size
        self._comm, self._trace = comm, trace

    def send(self, array, dst):
        """Send a copy of ``array`` to rank ``dst`` (returns at once)."""
        a = np.array(array, dtype=np.float64, copy=True).ravel()
        self._comm.send(array, dst)
        self._trace.append((0, int(dst), a))

    def recv(self, src):
        """The next array rank ``src`` sent to this rank (blocks until it arrives)."""
        a = self._comm.recv(src)
        self._trace.append((1, int(src), np.array(a, dtype=np.float64, copy=True).ravel()))
        return a


def observe_ring(ns, case):
    n = case.params["world"]
    traces = [[] for _ in range(n)]
    world, results = _world_run(lambda comm, x: ns.ring_all_reduce(RingComm(comm, traces[comm.rank]), x), n,
                                [(case["xs"][r].copy(),) for r in range(n)])
    obs = {"messages": np.array(world.messages, dtype=np.int64).reshape(-1, 4)}
    for r, trace in enumerate(traces):      # rank r's sends and recvs in order: (kind, peer, length), values
        obs[f"ops{r}"] = np.array([(k, peer, len(a)) for k, peer, a in trace], dtype=np.int64).reshape(-1, 3)
        obs[f"vals{r}"] = np.concatenate([a for _, _, a in trace]) if trace else np.zeros(0)
    if isinstance(results, str):
        return dict(obs, deadlock=np.array(results))
    for r, res in enumerate(results):
        obs[f"result{r}"] = np.asarray(res, dtype=np.float64)
    return obs


def _ddp():
    """Parent-only: what the all-reduces carried (``_a6_data_parallel/ddp.py``)."""
    from autograder.assignments._a6_data_parallel import ddp
    return ddp


def dataflow(case, obs):
    """None when every rank's messages and result follow from its input and what it received; else why not
    (parent: ``_a6_data_parallel/dataflow.py``)."""
    from autograder.assignments._a6_data_parallel.dataflow import dataflow as check
    return check(case["xs"], obs)


def _deadlocked(obs):
    if "deadlock" in obs:
        return Verdict.fail(f"ring_all_reduce never finished: {obs['deadlock']}. A ring must never have every "
                            f"rank waiting in recv at once: send your chunk before you receive the next one")
    return None


def _diagnose_chunk(xs, got, sl, r, c):
    """A pointed message for a wrong chunk: whose inputs does it actually hold?"""
    n = len(xs)
    for k in range(1, n + 1):
        for subset in itertools.combinations(range(n), k):
            if np.allclose(got[sl], xs[list(subset), sl].sum(0), atol=1e-9):
                return (f"rank {r}: chunk {c} (elements {sl.start}:{sl.stop}) holds the sum of rank(s) "
                        f"{list(subset)} only, not of all {n} ranks: a reduce-scatter step sends or adds the "
                        f"wrong chunk (an index off by one?), or the all-gather overwrote a finished chunk")
    for factor in (2, n, 1 / n):
        if np.allclose(got[sl], factor * xs[:, sl].sum(0), atol=1e-9):
            return (f"rank {r}: chunk {c} is {factor:g} x the sum: a chunk was added more than once or "
                    f"divided (an all-reduce returns the plain sum)")
    return f"rank {r}: chunk {c} (elements {sl.start}:{sl.stop}) is not the sum of the ranks' chunks"


def verdict_ring_sum(case, obs, ctx):
    bad = _deadlocked(obs)
    if bad:
        return bad
    why = dataflow(case, obs)
    if why:
        return Verdict.fail(why)
    xs, n = case["xs"], case.params["world"]
    bounds = np.cumsum([0] + [len(c) for c in np.array_split(np.arange(xs.shape[1]), n)])
    for r in range(n):
        got = obs.get(f"result{r}")
        v = V.compare(f"ring_all_reduce on rank {r}", got, xs.sum(0), atol=1e-9, rtol=1e-9)
        if not v.passed and got is not None and np.shape(got) == (xs.shape[1],):
            for c in range(n):
                sl = slice(int(bounds[c]), int(bounds[c + 1]))
                if not np.allclose(got[sl], xs[:, sl].sum(0), atol=1e-9):
                    return Verdict.fail(_diagnose_chunk(xs, got, sl, r, c))
        if not v.passed:
            return v
    return Verdict.ok()


def _check_messages(case, obs, exact):
    n, nbytes = case.params["world"], case["xs"][0].nbytes
    msgs = obs["messages"]
    for src, dst, size, seq in msgs:
        if dst != (src + 1) % n:
            return Verdict.fail(f"rank {src} sent {size} bytes to rank {dst} (message #{seq}); in a ring every "
                                f"rank sends only to its right neighbour, rank {(src + 1) % n}")
    sent = np.bincount(msgs[:, 0], weights=msgs[:, 2], minlength=n) if len(msgs) else np.zeros(n)
    count = np.bincount(msgs[:, 0], minlength=n) if len(msgs) else np.zeros(n, int)
    for r in range(n):
        if count[r] != 2 * (n - 1):
            return Verdict.fail(f"rank {r} sent {count[r]} messages; a ring all-reduce sends 2(N-1) = "
                                f"{2 * (n - 1)}: N-1 steps of reduce-scatter, then N-1 of all-gather")
    ring = 2 * (n - 1) / n * nbytes
    if exact:
        for r in range(n):
            if sent[r] != ring:
                return Verdict.fail(f"rank {r} sent {int(sent[r])} bytes; the ring sends 2(N-1)/N x {nbytes} = "
                                    f"{ring:g} bytes per rank (one chunk of size/N per step)")
    elif sent.sum() != 2 * (n - 1) * nbytes:
        return Verdict.fail(f"the ranks sent {int(sent.sum())} bytes in all; a ring sends every chunk 2(N-1) "
                            f"times: {2 * (n - 1) * nbytes} bytes for {nbytes}-byte vectors")
    return Verdict.ok(f"{int(sent.max())} bytes per rank at most (ring cost {ring:g})")


def verdict_ring_bytes(case, obs, ctx):
    """The ring's traffic, credited only to a ring that sums: messages of the right size that carry nothing
    (or results taken elsewhere) earn nothing."""
    v = _deadlocked(obs) or verdict_ring_sum(case, obs, ctx)
    if not v.passed:
        return Verdict.fail(f"the bytes are credited only to a ring whose result is right and comes from its "
                            f"messages: {v.message}")
    return _check_messages(case, obs, exact=True)


def verdict_ring_odd(case, obs, ctx):
    return _deadlocked(obs) or (verdict_ring_sum(case, obs, ctx) & _check_messages(case, obs, exact=False))


# ---- part 2: bucketed DDP on a small tanh MLP -----------------------------------------------------------------
def inputs_model(p):
    rng = np.random.default_rng(p["seed"])
    i, h, o = p["widths"]
    rows = p["world"] * p["batch"]
    return {"W1": rng.standard_normal((h, i)) * 0.5, "b1": rng.standard_normal(h) * 0.1,
            "W2": rng.standard_normal((o, h)) * 0.5, "b2": rng.standard_normal(o) * 0.1,
            "X": rng.standard_normal((p.get("steps", 1), rows, i)),
            "Y": rng.standard_normal((p.get("steps", 1), rows, o))}


PARAMS = ("W1", "b1", "W2", "b2")  # registration order of nn.Sequential(Linear, Tanh, Linear)


def _loss(theta, x, y):
    W1, b1, W2, b2 = theta
    return np.mean((np.tanh(x @ W1.T + b1) @ W2.T + b2 - y) ** 2)


def _numeric_grads(theta, x, y):
    """Float64 central differences of the global mean loss (parent)."""
    return V.numeric_vjp(lambda *t: np.asarray(_loss(t, x, y)), [t.copy() for t in theta])


def expected_buckets(case):
    """minigrad's own bucket assignment (parent): reverse registration order, a bucket never grows past the
    cap (a larger tensor gets its own)."""
    import minigrad as mg
    from minigrad.distributed.ddp import assign_buckets
    named = [(name, mg.tensor(case[name])) for name in PARAMS]
    cap = case.params["cap"]
    return [[PARAMS.index(name) for name, _ in b.members] for b in assign_buckets(named, cap, cap)]


class DDPComm:
    """What part 2 hands each rank: rank, size and the world's asynchronous all-reduce. Every all-reduce's
    payload is recorded, so the parent sees which gradients each one carried."""

    def __init__(self, comm, trace):
        self.rank, self.size = comm.rank, comm.size
        self._comm, self._trace = comm, trace

    def iall_reduce(self, array):
        """Start summing ``array`` over all ranks; ``.wait()`` on the result returns the sum."""
        self._trace.append(np.array(array, dtype=np.float64, copy=True).ravel())
        return self._comm.iall_reduce(array)


def _ddp_rank(comm, ns, model, case, steps, trace):
    """Child, one rank: the student's DDP on its shard; plain SGD; events logged by the world. Returns its
    first step's gradients (after backward), its final parameters and its local gradients (before DDP)."""
    import minigrad as mg
    params = list(model.parameters())
    local = {}

    def seen(t, k):
        comm.log("grad", k)
        local.setdefault(k, np.array(t.grad.numpy(), dtype=np.float64, copy=True))   # step 0, before DDP
    for k, p in enumerate(params):
        p.register_post_accumulate_grad_hook(lambda t, k=k: seen(t, k))
    ns.BucketedDDP(model, DDPComm(comm, trace), case.params["cap"])
    b, r = case.params["batch"], comm.rank
    first = None
    for step in range(steps):
        for p in params:
            p.grad = None
        comm.log("step", step)
        x = mg.tensor(case["X"][step, r * b:(r + 1) * b])
        y = mg.tensor(case["Y"][step, r * b:(r + 1) * b])
        ((model(x) - y) ** 2).mean().backward()
        comm.log("backward_done", step)
        if first is None:
            first = [p.grad.numpy().copy() if p.grad is not None else np.full(p.shape, np.nan) for p in params]
        with mg.no_grad():
            for p in params:
                if p.grad is not None:
                    p.array -= LR * p.grad.array
    locals_ = [local.get(k, np.full(p.shape, np.nan)) for k, p in enumerate(params)]
    return first, [p.detach().numpy() for p in params], locals_


def _observe_ddp(ns, case, steps):
    import minigrad as mg
    from minigrad import nn
    i, h, o = case.params["widths"]
    models = []
    for _ in range(case.params["world"]):
        m = nn.Sequential(nn.Linear(i, h), nn.Tanh(), nn.Linear(h, o)).double()
        for p, name in zip(m.parameters(), PARAMS):
            p.array[...] = case[name]
        models.append(m)
    traces = [[] for _ in models]
    world, results = _world_run(lambda comm, m: _ddp_rank(comm, ns, m, case, steps, traces[comm.rank]),
                                len(models), [(m,) for m in models], timeout=5.0)
    kinds = {"grad": 0, "iall_reduce": 1, "step": 2, "backward_done": 3}
    events = [(e[0], kinds[e[1]], e[-1]) for e in world.events if e[1] in kinds]
    obs = {"events": np.array(events, dtype=np.int64).reshape(-1, 3)}
    for r, trace in enumerate(traces):          # what each of the rank's all-reduces carried, in order
        obs[f"payload_sizes{r}"] = np.array([len(a) for a in trace], dtype=np.int64)
        obs[f"payloads{r}"] = np.concatenate(trace) if trace else np.zeros(0)
    if isinstance(results, str):
        return dict(obs, deadlock=np.array(results))
    for r, (first, final, local) in enumerate(results):
        for k, name in enumerate(PARAMS):
            obs[f"grad{r}.{name}"], obs[f"param{r}.{name}"] = first[k], final[k]
            obs[f"local{r}.{name}"] = local[k]
    return obs


def observe_ddp(ns, case):
    return _observe_ddp(ns, case, case.params.get("steps", 1))


def _ddp_failed(obs):
    if "deadlock" in obs:
        return Verdict.fail(f"backward never finished: {obs['deadlock']}. Launch each bucket's iall_reduce once, "
                            f"in bucket order, and wait for all of them at the end of backward")
    for r in range(len([k for k in obs if k.startswith("payload_sizes")])):
        launched = [int(a) for rank, kind, a in obs["events"] if rank == r and kind == 1]
        if launched != [int(n) for n in obs[f"payload_sizes{r}"]]:     # the world's log vs what was sent
            return Verdict.rejected(f"rank {r}'s event log lists all-reduces of {launched} elements, but it sent "
                                    f"{[int(n) for n in obs[f'payload_sizes{r}']]}: the log was written to by hand")
    return None


def verdict_buckets(case, obs, ctx):
    """The buckets are read off what the all-reduces carried, never off an attribute: buckets computed but
    not used to communicate earn nothing."""
    bad = _ddp_failed(obs)
    if bad:
        return bad
    got, why = _ddp().launched_buckets(case, obs, PARAMS)
    if why:
        return Verdict.fail(f"the buckets are read off the all-reduces your DDP launched: {why}")
    want = expected_buckets(case)
    if got == want:
        return Verdict.ok()
    names = lambda bs: [[PARAMS[k] for k in b] for b in bs]  # noqa: E731
    if not got:
        return Verdict.fail(f"no all-reduce was launched before backward ended, so no gradient was bucketed; "
                            f"expected the buckets {names(want)}")
    if sorted(k for b in got for k in b) == sorted(k for b in want for k in b) and got[0][0] == 0:
        return Verdict.fail(f"buckets {names(got)}: they must follow the *reverse* registration order (backward "
                            f"produces the last layer's gradients first); expected {names(want)}")
    for b in got:
        size = sum(case[PARAMS[k]].nbytes for k in b)
        if len(b) > 1 and size > case.params["cap"]:
            return Verdict.fail(f"bucket {[PARAMS[k] for k in b]} holds {size} bytes, more than the cap of "
                                f"{case.params['cap']}: close a bucket before a tensor would overflow it")
    return Verdict.fail(f"the all-reduces carried the buckets {names(got)} (parameter names), expected "
                        f"{names(want)} for a cap of {case.params['cap']} bytes")


def verdict_grads(case, obs, ctx):
    bad = _ddp_failed(obs)
    if bad:
        return bad
    n, theta = case.params["world"], [case[k].copy() for k in PARAMS]
    numeric = _numeric_grads(theta, case["X"][0], case["Y"][0])
    for r in range(n):
        for name, num in zip(PARAMS, numeric):
            got = obs[f"grad{r}.{name}"]
            if np.all(np.isnan(got)):
                return Verdict.fail(f"rank {r}: {name}.grad is None after backward")
            if not np.allclose(got, num, atol=1e-6, rtol=1e-5):
                for factor, why in ((1 / n, "divided by the world size twice (averaged twice?)"),
                                    (n, "summed over ranks but never divided by the world size")):
                    if np.allclose(got, factor * num, atol=1e-6, rtol=1e-5):
                        return Verdict.fail(f"rank {r}: {name}.grad is {factor:g} x the average gradient: {why}")
                return V.check_gradient(f"rank {r}'s averaged gradients", name, got, num, atol=1e-6)
        why = _ddp().from_all_reduce(case, obs, r, PARAMS)
        if why:
            return Verdict.fail(why)
    return Verdict.ok()


def verdict_launch(case, obs, ctx):
    """Every bucket's all-reduce starts right after its last gradient, in bucket order, before backward ends;
    credited only to all-reduces that carry the gradients."""
    bad = _ddp_failed(obs)
    if bad:
        return bad
    _, why = _ddp().launched_buckets(case, obs, PARAMS)
    if why:
        return Verdict.fail(f"the launches are credited only to all-reduces that carry the gradients: {why}")
    want = expected_buckets(case)
    sizes = [sum(case[PARAMS[k]].size for k in b) for b in want]
    for r in range(case.params["world"]):
        ev = [(int(kind), int(a)) for rank, kind, a in obs["events"] if rank == r]
        end = next(i for i, e in enumerate(ev) if e[0] == 3)
        ev = ev[:end + 1]
        launches = [int(a) for kind, a in ev if kind == 1]
        if launches != sizes:
            return Verdict.fail(f"rank {r} launched all-reduces of {launches} elements before backward ended; "
                                f"the buckets hold {sizes} elements, in that order: one iall_reduce per bucket, "
                                f"started from the hooks (not after backward returned)")
        ready, launched = set(), 0
        for i, (kind, a) in enumerate(ev):
            if kind == 0:
                if launched < len(want) and set(want[launched]) <= ready:
                    return Verdict.fail(f"rank {r}: bucket {launched} ({[PARAMS[k] for k in want[launched]]}) was "
                                        f"complete, but its all-reduce had not started when the next gradient "
                                        f"({PARAMS[a]}) arrived: launch a bucket the moment its last gradient is "
                                        f"ready, so communication overlaps the rest of backward")
                ready.add(a)
            elif kind == 1:
                if not set(want[launched]) <= ready:
                    return Verdict.fail(f"rank {r}: bucket {launched}'s all-reduce started before all of its "
                                        f"gradients were ready")
                launched += 1
    return Verdict.ok()


def verdict_train(case, obs, ctx):
    bad = _ddp_failed(obs)
    if bad:
        return bad
    theta = [case[k].copy() for k in PARAMS]
    for step in range(case.params["steps"]):
        grads = _numeric_grads(theta, case["X"][step], case["Y"][step])
        theta = [t - LR * g for t, g in zip(theta, grads)]
    for r in range(case.params["world"]):
        for name, want in zip(PARAMS, theta):
            got = obs[f"param{r}.{name}"]
            if not np.array_equal(got, obs[f"param0.{name}"]):
                return Verdict.fail(f"after {case.params['steps']} steps rank {r}'s {name} differs from rank 0's: "
                                    f"every rank must apply the same averaged gradient")
            v = V.compare(f"rank {r}: {name} after {case.params['steps']} SGD steps", got, want, atol=1e-6)
            if not v.passed:
                return v
    for r in range(case.params["world"]):       # the ranks agree because they communicated, not otherwise
        why = _ddp().from_all_reduce(case, obs, r, PARAMS)
        if why:
            return Verdict.fail(f"training is credited only to ranks whose gradients were all-reduced: {why}")
    return Verdict.ok()


def _ring_cases(*specs):
    return [Case({"world": n, "size": s, "seed": seed}, label=f"N={n} ranks, {s} elements")
            for n, s, seed in specs]


def _model_cases(*specs):
    return [Case({"world": n, "cap": cap, "widths": [3, 5, 2], "batch": 4, "seed": seed, "steps": steps},
                 label=f"N={n} ranks, bucket cap {cap} bytes" + (f", {steps} steps" if steps > 1 else ""))
            for n, cap, seed, steps in specs]


# minigrad's collectives and DDP, left out of every part's child (autograder/stubs.py); in part 1 also the
# simulated world's own all-reduce, so the ring has only send and recv to work with
STUBS = ["minigrad.distributed.collectives", "minigrad.distributed.ddp", "minigrad.distributed.backend_mpi",
         "minigrad.distributed.zero"]

ASSIGNMENT = Assignment(
    id="a6",
    name="a6_data_parallel",
    title="Data parallelism: a ring all-reduce and bucketed DDP",
    notebook="a6_data_parallel.ipynb",
    solution="solutions/a6_data_parallel.ipynb",
    preamble="import numpy as np\nimport minigrad as mg\nfrom minigrad.autograd import engine\n",
    timeout=20,
    memory_mb=2048,
    # all of minigrad.distributed (its collectives, DDP and their re-exports): the grader hands each rank its
    # world, so a graded cell never needs to import it (the notebook's SimWorld cell is not graded)
    summary="the student's ring all-reduce on a recorded world of 2-6 ranks given only send and recv: sums vs NumPy, "
            "every message and result traced back to what each rank received, 2(N-1)/N bytes per rank, neighbour-"
            "only messages, deadlocks named; bucketed DDP: buckets read off the all-reduces launched from hooks "
            "before backward ends, gradients the all-reduced averages and vs float64 central differences",
    forbidden=["minigrad.distributed"],
    parts=[
        Part("part1", "Ring all-reduce", cells=["a6-ring"], names=["ring_all_reduce"],
             stubs=STUBS + ["minigrad.distributed.simworld.SimWorld._iall_reduce"],
             objective="reduce-scatter + all-gather on send/recv, each rank talking only to its neighbour",
             tests=[
                 Test("sum on every rank", 20, observe_ring, verdict_ring_sum, inputs_ring,
                      cases=_ring_cases((2, 8, 0), (3, 9, 1), (4, 12, 2))),
                 Test("bytes and neighbours", 15, observe_ring, verdict_ring_bytes, inputs_ring,
                      cases=_ring_cases((3, 9, 3), (4, 16, 4))),
                 Test("sizes that do not divide", 10, observe_ring, verdict_ring_odd, inputs_ring,
                      cases=_ring_cases((4, 10, 5), (3, 7, 6))),
             ]),
        Part("part2", "Bucketed DDP", cells=["a6-ddp"], names=["BucketedDDP"], stubs=STUBS,
             objective="reverse-order buckets, all-reduce launched from post-accumulate-grad hooks, averaged",
             tests=[
                 Test("buckets", 10, observe_ddp, verdict_buckets, inputs_model,
                      cases=_model_cases((2, 100, 0, 1), (2, 150, 1, 1), (2, 10_000, 2, 1))),
                 Test("averaged gradients", 20, observe_ddp, verdict_grads, inputs_model,
                      cases=_model_cases((2, 100, 3, 1), (3, 150, 4, 1))),
                 Test("launched during backward", 15, observe_ddp, verdict_launch, inputs_model,
                      cases=_model_cases((2, 100, 5, 1), (3, 60, 6, 1))),
                 Test("training", 10, observe_ddp, verdict_train, inputs_model,
                      cases=_model_cases((2, 100, 7, 3))),
             ]),
    ],
)
