"""a9_model_parallelism: Megatron's tensor parallelism, a fully sharded (ZeRO-3) unit and a 1F1B pipeline.

  part1  CopyToParallel (f), ReduceFromParallel (g)   the conjugate ops: identity / all-reduce, swapped in backward
         ColumnParallelLinear, RowParallelLinear       an MLP split over ranks: one all-reduce forward, one backward
  part2  shard_flat(arrays, comm)                      FSDP's flat parameter, padded, one chunk per rank
         FSDPLinear (a Function)                       all-gather before forward, freed after, gathered again in
                                                       backward, gradients reduce-scattered and averaged
  part3  forward_step, backward_step, one_f_one_b     stages on send/recv, micro-batches in the 1F1B order

Each rank runs on a recorded world (``minigrad.distributed.SimWorld``: the ranks are threads of the sandboxed
child, as in a6; why not MPI: see a6's spec) and is handed only what its part teaches
(``_a9_model_parallelism/world.py``): part 1 ``all_reduce`` and ``all_gather``, part 2 ``all_gather`` and
``reduce_scatter``, built on the world's point-to-point messages (the world's own all-reduce is a stub), part 3
a stage with ``send``/``recv`` whose module's forwards and backwards are recorded by hooks. The parent holds the
world's message log against what was recorded (other traffic rejects the part, ``comm.py``), then judges
against the one-process model in float64 NumPy (``reference.py``) on 2-4 ranks and shapes the handout does not
use: values and gradients; which collectives ran in forward and in backward, with how many bytes, and what
each rank put in (its own shard's partial sums: a "parallel" layer that gathers its weight fails; ``tp.py``);
for the sharded unit the bytes still allocated when forward returns (the checked meter, the recorder's copies
and the inputs aside), credited only beside a gathered weight and right gradients (``fsdp.py``); for the
pipeline every message's value, and a timeline the parent replays from the stages' record (forward 1 unit,
backward 2): the 1F1B order, the activations each stage held and the bubble against (p-1)/(m+p-1); stages
that never compute at the same time score 0 for the part (``pipeline.py``).
"""
import numpy as np

from autograder.spec import Assignment, Case, Part, Test


def _parent(module, name):
    """A verdict (or helper) of ``_a9_model_parallelism/<module>.py``, imported when first called: in the parent
    only, so the child never loads the grader's reference or verdicts."""
    def call(*args):
        import importlib
        return getattr(importlib.import_module(f"autograder.assignments._a9_model_parallelism.{module}"), name)(*args)
    call.__name__ = name
    return call


verdict_conjugate, verdict_layer, verdict_mlp = (_parent("tp", n) for n in ("verdict_conjugate", "verdict_layer",
                                                                           "verdict_mlp"))
verdict_shard, verdict_fsdp_forward, verdict_fsdp_backward, verdict_fsdp_train, verdict_memory = (
    _parent("fsdp", n) for n in ("verdict_shard", "verdict_fsdp_forward", "verdict_fsdp_backward",
                                 "verdict_fsdp_train", "verdict_memory"))
verdict_grads, verdict_messages, verdict_order, verdict_bubble = (
    _parent("pipeline", n) for n in ("verdict_grads", "verdict_messages", "verdict_order", "verdict_bubble"))
flat_padded = _parent("reference", "flat_padded")


# ---- the recorded world (child) -------------------------------------------------------------------------------
def _run_world(case, rank_fn, part, recorders=None):
    """Child: the recorded world (``_a9_model_parallelism/world.py``)."""
    from autograder.assignments._a9_model_parallelism import world
    return world.run_world(case.params["world"], rank_fn, world.TPComm if part == 1 else world.FSDPComm, recorders)


def _world(case, rank_fn, part):
    from autograder.assignments._a9_model_parallelism import world
    return world.observation(*_run_world(case, rank_fn, part))


def _grad(t):
    return np.full(t.shape, np.nan) if t.grad is None else t.grad.numpy()


# ---- part 1: tensor parallelism ----------------------------------------------------------------------------------
def inputs_tp(p):
    rng = np.random.default_rng(p["seed"])
    n, B, (d, h, o) = p["world"], p["batch"], p["widths"]
    return {"x": rng.standard_normal((B, d)), "xs": rng.standard_normal((n, B, d)),
            "Us": rng.standard_normal((n, B, d)), "W1": rng.standard_normal((h, d)) * 0.5,
            "b1": rng.standard_normal(h) * 0.1, "W2": rng.standard_normal((o, h)) * 0.5,
            "b2": rng.standard_normal(o) * 0.1, "U": rng.standard_normal((B, o)), "Uh": rng.standard_normal((B, h))}


def _rows(case, r):
    from autograder.assignments._a9_model_parallelism.world import hidden_rows
    return hidden_rows(case.params, r)


def observe_conjugate(ns, case):
    """f on a replicated x, g on per-rank xs; every rank backpropagates its own upstream gradient."""
    import minigrad as mg
    op = case.params["op"]

    def rank(comm, r, mark):
        x = mg.tensor(case["x"] if op == "f" else case["xs"][r], requires_grad=True)
        y = (ns.CopyToParallel if op == "f" else ns.ReduceFromParallel).apply(x, comm=comm)
        mark()
        (y * mg.tensor(case["Us"][r])).sum().backward()
        return {"y": y.detach().numpy(), "dx": _grad(x)}
    return _world(case, rank, 1)


def observe_layer(ns, case):
    """One column-parallel or row-parallel layer alone, with each rank's shard of the weights."""
    import minigrad as mg
    col = case.params["layer"] == "column"

    def rank(comm, r, mark):
        rows = _rows(case, r)
        if col:
            layer = ns.ColumnParallelLinear(case["W1"][rows].copy(), case["b1"][rows].copy(), comm)
            x, up = mg.tensor(case["x"], requires_grad=True), case["Uh"][:, rows]
        else:
            layer = ns.RowParallelLinear(case["W1"].T[:, rows].copy(), case["bd"].copy(), comm)
            x, up = mg.tensor(case["Uh"][:, rows].copy(), requires_grad=True), case["x"]
        y = layer(x)
        mark()
        (y * mg.tensor(up)).sum().backward()
        return {"y": y.detach().numpy(), "dx": _grad(x), "dW": _grad(layer.weight), "db": _grad(layer.bias)}
    return _world(case, rank, 1)


def inputs_layer(p):
    out = inputs_tp(p)
    out["bd"] = np.random.default_rng(p["seed"] + 1).standard_normal(p["widths"][0]) * 0.1
    return out


def observe_mlp(ns, case):
    """Column-parallel -> tanh -> row-parallel, the loss sum(y * U) on every rank."""
    import minigrad as mg

    def rank(comm, r, mark):
        rows = _rows(case, r)
        fc = ns.ColumnParallelLinear(case["W1"][rows].copy(), case["b1"][rows].copy(), comm)
        proj = ns.RowParallelLinear(case["W2"][:, rows].copy(), case["b2"].copy(), comm)
        x = mg.tensor(case["x"], requires_grad=True)
        y = proj(fc(x).tanh())
        mark()
        (y * mg.tensor(case["U"])).sum().backward()
        return {"y": y.detach().numpy(), "dx": _grad(x), "dW1": _grad(fc.weight), "db1": _grad(fc.bias),
                "dW2": _grad(proj.weight), "db2": _grad(proj.bias)}
    return _world(case, rank, 1)


# ---- part 2: a fully sharded unit ----------------------------------------------------------------------------
def inputs_fsdp(p):
    rng = np.random.default_rng(p["seed"])
    n, B, widths = p["world"], p["batch"], p["widths"]
    out = {"X": rng.standard_normal((p.get("steps", 1), n * B, widths[0])),
           "U": rng.standard_normal((p.get("steps", 1), n * B, widths[-1]))}
    for k, (i, o) in enumerate(zip(widths[:-1], widths[1:])):
        W, b = rng.standard_normal((o, i)) / np.sqrt(i), rng.standard_normal(o) * 0.1
        flat, _ = flat_padded([W, b], n)
        out.update({f"W{k}": W, f"b{k}": b, f"shards{k}": flat.reshape(n, -1)})
    return out


def observe_shard(ns, case):
    shapes = case.params["shapes"]
    arrays = [case[f"a{k}"] for k in range(len(shapes))]
    return _world(case, lambda comm, r, mark: {"shard": ns.shard_flat([a.copy() for a in arrays], comm)},
                  2)


def inputs_shard(p):
    rng = np.random.default_rng(p["seed"])
    return {f"a{k}": rng.standard_normal(s) for k, s in enumerate(p["shapes"])}


def _fsdp_rank(ns, case, steps, lr, hold=None):
    """One rank of an FSDP model: tanh-joined FSDPLinear units on this rank's rows, plain SGD on the shards."""
    import minigrad as mg
    widths, B = case.params["widths"], case.params["batch"]

    def rank(comm, r, mark_):
        shards = [mg.tensor(case[f"shards{k}"][r].copy(), requires_grad=True) for k in range(len(widths) - 1)]
        out = {}
        for step in range(steps):
            rows = slice(r * B, (r + 1) * B)
            a = mg.tensor(case["X"][step, rows].copy(), requires_grad=True)
            x = a
            for k, s in enumerate(shards):
                a = ns.FSDPLinear.apply(a, s, comm=comm, out_features=widths[k + 1], in_features=widths[k])
                if k < len(shards) - 1:
                    a = a.tanh()
            if hold is not None:                # part of the memory test: keep the graph, backward later
                hold[r] = (a, x, shards)
                return {}
            mark_()
            ((a * mg.tensor(case["U"][step, rows])).sum() / B).backward()
            if step == 0:
                out.update({"y": a.detach().numpy(), "dx": _grad(x)})
                out.update({f"g{k}": _grad(s) for k, s in enumerate(shards)})
            with mg.no_grad():
                for s in shards:
                    if s.grad is not None:
                        s.sub_(lr * s.grad)
                    s.grad = None
        out.update({f"s{k}": s.detach().numpy() for k, s in enumerate(shards)})
        return out
    return rank


def observe_fsdp(ns, case):
    steps = case.params.get("steps", 1)
    return _world(case, _fsdp_rank(ns, case, steps, case.params.get("lr", 0.0)), 2)


def observe_memory(ns, case):
    """The bytes still allocated when every rank's forward has returned (the checked meter, process-wide, the
    recorder's own copies of the payloads taken out); backward then runs in a second world, on the same
    recorders (the graph keeps them), rebound to it."""
    import gc
    import minigrad as mg
    from minigrad.distributed.simworld import SimWorld
    from autograder._guard import meter
    from autograder.assignments._a9_model_parallelism.world import observation
    n, B, hold, recorders = case.params["world"], case.params["batch"], {}, {}
    gc.collect()
    with meter() as m:
        run = _run_world(case, _fsdp_rank(ns, case, 1, 0.0, hold=hold), 2, recorders)
    obs = observation(*run)
    inputs = sum(8 * int(np.prod(t.shape)) for y, x, shards in hold.values() for t in (x, *shards))
    obs["retained"] = np.asarray(m.current - inputs - sum(a.nbytes for t in run[1] for _, a in t), dtype=np.float64)
    grads = {}

    def backward(comm):
        r = comm.rank
        recorders[r]._comm = comm
        y, x, shards = hold[r]
        ((y * mg.tensor(case["U"][0, r * B:(r + 1) * B])).sum() / B).backward()
        grads[r] = _grad(shards[0])
    if len(hold) == n:
        SimWorld(n, timeout=5.0).run(backward)
        obs.update({f"g0.{r}": grads[r] for r in range(n)})
    return obs


# ---- part 3: the 1F1B pipeline ----------------------------------------------------------------------------
def inputs_pipe(p):
    rng = np.random.default_rng(p["seed"])
    n, widths, rows = p["world"], p["widths"], p["micro"] * p["batch"]
    out = {"X": rng.standard_normal((rows, widths[0])), "U": rng.standard_normal((rows, widths[-1]))}
    for k in range(n):
        out[f"W{k}"] = rng.standard_normal((widths[k + 1], widths[k])) / np.sqrt(widths[k])
        out[f"b{k}"] = rng.standard_normal(widths[k + 1]) * 0.1
    return out


def observe_pipe(ns, case):
    """Each rank runs the student's ``one_f_one_b`` on its stage (Linear, then tanh but on the last stage)."""
    import minigrad as mg
    from minigrad import nn
    from autograder.assignments._a9_model_parallelism import world
    n, m, b, widths = case.params["world"], case.params["micro"], case.params["batch"], case.params["widths"]
    chunks = lambda a: [a[i * b:(i + 1) * b].copy() for i in range(m)]  # noqa: E731
    layers = {}

    def stage(c, trace):
        r = c.rank
        lin = nn.Linear(widths[r], widths[r + 1]).double()
        with mg.no_grad():
            lin.weight.copy_(mg.tensor(case[f"W{r}"]))
            lin.bias.copy_(mg.tensor(case[f"b{r}"]))
        layers[r] = lin
        module = nn.Sequential(lin, nn.Tanh()) if r < n - 1 else nn.Sequential(lin)
        return world.PipeStage(c, trace, module, chunks(case["X"]), chunks(case["U"]), m * b)

    def rank(st, r, mark):
        ns.one_f_one_b(st, m)
        return {"gW": _grad(layers[r].weight), "gb": _grad(layers[r].bias)}
    w, traces, _, results = world.run_world(n, rank, stage)
    return world.pipe_observation(w, traces, results)


# ---- the cases --------------------------------------------------------------------------------------------------
def _tp(n, widths, batch, seed, **extra):
    label = f"N={n} ranks, widths {tuple(widths)}, batch {batch}"
    return Case(dict({"world": n, "widths": list(widths), "batch": batch, "seed": seed}, **extra),
                label=(f"{extra['op']}: " if "op" in extra else "") + label)


def _pipe(n, m, widths, batch, seed):
    return Case({"world": n, "micro": m, "widths": list(widths), "batch": batch, "seed": seed},
                label=f"p={n} stages, m={m} micro-batches of {batch} rows, widths {tuple(widths)}")


def _fsdp(n, widths, batch, seed, steps=1, lr=0.0):
    return Case({"world": n, "widths": list(widths), "batch": batch, "seed": seed, "steps": steps, "lr": lr},
                label=f"N={n} ranks, widths {tuple(widths)}, {batch} rows per rank"
                      + (f", {steps} SGD steps" if steps > 1 else ""))


# minigrad's collectives, DDP, ZeRO, FSDP, tensor and pipeline parallelism, and the world's own all-reduce, left
# out of every part's child (autograder/stubs.py): the recorder's collectives are all a rank has
STUBS = ["minigrad.distributed.collectives", "minigrad.distributed.ddp", "minigrad.distributed.backend_mpi",
         "minigrad.distributed.zero", "minigrad.distributed.tensor_parallel.comm_ops",
         "minigrad.distributed.tensor_parallel.layers", "minigrad.distributed.tensor_parallel.loss",
         "minigrad.distributed.fsdp.flat_param", "minigrad.distributed.fsdp.FullyShardedDataParallel",
         "minigrad.distributed.simworld.SimWorld._iall_reduce"]

ASSIGNMENT = Assignment(
    id="a9",
    name="a9_model_parallelism",
    title="Model parallelism: Megatron's tensor parallelism, an FSDP unit and a 1F1B pipeline",
    notebook="a9_model_parallelism.ipynb",
    solution="solutions/a9_model_parallelism.ipynb",
    preamble="import numpy as np\nimport minigrad as mg\nfrom minigrad import nn\nfrom minigrad.nn import functional as F\n"
             "from minigrad.autograd import Function\n",
    timeout=30,
    memory_mb=2048,
    summary="Megatron's conjugate f/g ops and column/row-parallel layers on a recorded world of 2-4 ranks, values "
            "and gradients vs the one-process MLP in float64, the collectives each rank ran in forward and "
            "backward (kind, bytes, order) and what it put in (its own shard's partial sums; gathering the weight "
            "fails); an FSDP unit: flat padded shards, all-gather before forward and again in backward, averaged "
            "reduce-scatter, training vs one process, bytes kept after forward (checked meter) under the full "
            "weight; 1F1B on send/recv: gradients vs one process, every message the model's value, the stages' "
            "order, activations held and bubble from the replayed timeline (stages that never overlap score 0)",
    forbidden=["minigrad.distributed"],
    parts=[
        Part("part1", "Tensor parallelism", cells=["a9-fg", "a9-tp"],
             names=["CopyToParallel", "ReduceFromParallel", "ColumnParallelLinear", "RowParallelLinear"],
             stubs=STUBS, objective="f and g, column- and row-parallel layers: one all-reduce forward, one backward",
             tests=[
                 Test("f: identity forward, all-reduce backward", 6, observe_conjugate, verdict_conjugate, inputs_tp,
                      cases=[_tp(2, (3, 4, 2), 2, 0, op="f"), _tp(3, (4, 6, 2), 3, 1, op="f")]),
                 Test("g: all-reduce forward, identity backward", 6, observe_conjugate, verdict_conjugate, inputs_tp,
                      cases=[_tp(2, (3, 4, 2), 2, 2, op="g"), _tp(3, (4, 6, 2), 3, 3, op="g")]),
                 Test("column-parallel layer", 8, observe_layer, verdict_layer, inputs_layer,
                      cases=[_tp(2, (3, 4, 2), 2, 4, layer="column"), _tp(4, (5, 8, 2), 3, 5, layer="column")]),
                 Test("row-parallel layer", 8, observe_layer, verdict_layer, inputs_layer,
                      cases=[_tp(2, (3, 4, 2), 2, 6, layer="row"), _tp(4, (5, 8, 2), 3, 7, layer="row")]),
                 Test("MLP vs one process, one all-reduce each way", 12, observe_mlp, verdict_mlp, inputs_tp,
                      cases=[_tp(2, (4, 6, 3), 3, 8), _tp(3, (5, 9, 2), 2, 9)]),
             ]),
        Part("part2", "A fully sharded unit", cells=["a9-shard", "a9-fsdp"], names=["shard_flat", "FSDPLinear"],
             stubs=STUBS, objective="flat padded shards; all-gather, free, all-gather again, reduce-scatter",
             tests=[
                 Test("flat padded shards", 5, observe_shard, verdict_shard, inputs_shard,
                      cases=[Case({"world": 2, "shapes": [[3, 4], [3]], "seed": 10}, label="N=2, (3, 4) + (3,)"),
                             Case({"world": 4, "shapes": [[2, 3], [2], [5]], "seed": 11},
                                  label="N=4, (2, 3) + (2,) + (5,)")]),
                 Test("forward all-gathers the shard", 7, observe_fsdp, verdict_fsdp_forward, inputs_fsdp,
                      cases=[_fsdp(2, (4, 3), 2, 12), _fsdp(3, (5, 4), 2, 13)]),
                 Test("backward gathers again and reduce-scatters", 10, observe_fsdp, verdict_fsdp_backward,
                      inputs_fsdp, cases=[_fsdp(2, (4, 3), 2, 14), _fsdp(3, (5, 4), 2, 15)]),
                 Test("two units train like one process", 6, observe_fsdp, verdict_fsdp_train, inputs_fsdp,
                      cases=[_fsdp(2, (4, 5, 3), 2, 16, steps=3, lr=0.1)]),
                 Test("the full weight is freed after forward", 7, observe_memory, verdict_memory, inputs_fsdp,
                      cases=[_fsdp(2, (96, 64), 2, 17)]),
             ]),
        Part("part3", "A 1F1B pipeline", cells=["a9-1f1b"], names=["forward_step", "backward_step", "one_f_one_b"],
             stubs=STUBS + ["minigrad.distributed.pipelining.schedules", "minigrad.distributed.pipelining.stage"],
             objective="stages on send/recv, micro-batches in the 1F1B order: p - rank in flight, (p-1)/(m+p-1) bubble",
             tests=[
                 Test("gradients vs one process", 8, observe_pipe, verdict_grads, inputs_pipe,
                      cases=[_pipe(2, 4, (3, 4, 2), 2, 20), _pipe(3, 4, (3, 5, 4, 2), 1, 21)]),
                 Test("activations and gradients between neighbours", 5, observe_pipe, verdict_messages, inputs_pipe,
                      cases=[_pipe(3, 3, (2, 3, 3, 2), 2, 22)]),
                 Test("1F1B order, at most p - rank micro-batches held", 7, observe_pipe, verdict_order, inputs_pipe,
                      cases=[_pipe(3, 5, (3, 4, 4, 2), 1, 23), _pipe(4, 6, (2, 3, 3, 3, 2), 1, 24)]),
                 Test("bubble (p-1)/(m+p-1)", 5, observe_pipe, verdict_bubble, inputs_pipe,
                      cases=[_pipe(4, 6, (2, 3, 3, 3, 2), 1, 25)]),
             ]),
    ],
)