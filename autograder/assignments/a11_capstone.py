"""a11_capstone: train a given model on a given dataset under a memory budget, with the tools of a3-a7 and
the student's own choices. Graded on what the grader measures itself, never on a number the student reports.

  part1  train_step(model, optimizer, x, y, micro_batch)   the micro-batches' accumulated gradients equal the
                                                            full batch's (vs a float64 run in the parent); the
                                                            peak of two AdamW steps (the grader's meter), credited
                                                            only beside right gradients
  part2  train(model, x, y, budget, ...)                   the validation loss the trained weights reach (the
                                                            parent evaluates them on data the child never sees)
                                                            within 15 % + 0.05 of the reference run's; the peak of
                                                            the whole run (model built inside the meter) under the
                                                            budget, credited only to a run that reaches that loss;
                                                            the CPU time of the run against the plain loop's,
                                                            measured before any student code ran (leaderboard)

Data: sklearn's 8x8 digits, split, pixels and labels permuted by a seed that each grading process draws at
random for part 2 (the spec is public: a fixed seed would let a notebook train at cell time and only copy
weights in train()), handed to the student's code as read-only arrays; the validation split stays in the
parent, which runs the reference for that seed itself. A notebook that recognises the public digits in its
data and undoes the permutation is beyond what is checked: the leaderboard flags runs faster than the plain
loop for the instructor to read.

Forbidden: minigrad.budget (its planner and TrainStep do what the capstone asks students to do), minigrad.
examples (eight_gb trains under a budget by itself), memory the meter does not see (mmap, np.memmap) and work
in other processes or threads. autograder/leaderboard.py re-runs the top entries of a class in fresh children
and ranks them by the CPU seconds the kernel counted (LEADERBOARD below).
"""
import contextlib
import gc
import os
import time

import numpy as np

from autograder import verdicts as V
from autograder.spec import Assignment, Case, Part, Test, Verdict

HIDDEN, DEPTH, CLASSES, FEATURES = 128, 3, 10, 64
RECIPE = {"epochs": 10, "batch_size": 512, "lr": 1e-2}
LOSS_SLACK = (1.15, 0.05)          # the bound: 1.15 x the reference run's validation loss + 0.05
SPEED_FLOOR = 0.05                 # time under the budget: at least 0.05x the plain loop's speed (CPU time)
_cpu, _wall = time.process_time, time.perf_counter     # bound when the child imports the spec: before any cell
_BASELINE = {}                     # CPU seconds per sample of the plain loop, measured by the preamble
TRAIN_ROWS = 1438                  # the digits' training split
SAMPLES = RECIPE["epochs"] * (TRAIN_ROWS // RECIPE["batch_size"]) * RECIPE["batch_size"]   # the recipe's
_DATA = {}                         # parent: the digits, read once
_FRESH = {}                        # parent: the seeds drawn for this grading process
_RUNS = {}                         # child: one training run per case, judged by the three tests of part 2


def one_blas_thread():
    """BLAS threads only slow these small matmuls down (on a loaded machine, 20x): one thread where threadpoolctl
    is installed (with scikit-learn); the sandbox child already has one (OPENBLAS_NUM_THREADS=1)."""
    if os.environ.get("OPENBLAS_NUM_THREADS") == "1":
        return contextlib.nullcontext()
    try:
        from threadpoolctl import threadpool_limits
        return threadpool_limits(1, user_api="blas")
    except Exception:
        return contextlib.nullcontext()


def build_model(seed):
    """The capstone's model: an MLP 64 -> 128 -> 128 -> 128 -> 10 (42 k parameters), initialised by `seed`."""
    import minigrad as mg
    from minigrad import nn
    mg.manual_seed(int(seed))
    layers, width = [], FEATURES
    for _ in range(DEPTH):
        layers += [nn.Linear(width, HIDDEN), nn.ReLU()]
        width = HIDDEN
    return nn.Sequential(*layers, nn.Linear(width, CLASSES))


def _raw_digits():
    """The 1797 8x8 digits in [0, 1] as sklearn ships them: its data file read with NumPy (importing sklearn
    costs a grader process more than a second), or minigrad.datasets' loader where the file is not found."""
    import os
    from importlib.util import find_spec
    if "digits" not in _DATA:
        spec = find_spec("sklearn")
        path = os.path.join(os.path.dirname(spec.origin), "datasets", "data", "digits.csv.gz") if spec else ""
        if os.path.isfile(path):
            raw = np.loadtxt(path, delimiter=",")
            _DATA["digits"] = (raw[:, :-1] / 16).astype(np.float32), raw[:, -1].astype(np.int64)
        else:
            from minigrad.datasets import load_digits_arrays
            _DATA["digits"] = load_digits_arrays("all", flatten=True)
    return _DATA["digits"]


def digits(seed, split):
    """(x, y) of the grader's `split` ("train": 1438 digits, "test": the other 359), the split, the pixels and
    the labels all permuted by `seed` (parent and self-check only: the child gets "train" as arrays)."""
    x, y = _raw_digits()
    rng = np.random.default_rng(int(seed) + 7919)
    rows, pixels, labels = rng.permutation(len(x)), rng.permutation(FEATURES), rng.permutation(CLASSES)
    rows = rows[:TRAIN_ROWS] if split == "train" else rows[TRAIN_ROWS:]
    return np.ascontiguousarray(x[rows][:, pixels], dtype=np.float32), labels[y[rows]].astype(np.int64)


def data_seed(p):
    """A case's seed: a number, or a name ("fresh") for a seed drawn at random once per grading process, so that
    no submission can know its training data before train() receives it (the spec is public)."""
    if isinstance(p["seed"], int):
        return p["seed"]
    if p["seed"] not in _FRESH:
        import secrets
        _FRESH[p["seed"]] = secrets.randbelow(2 ** 31)
    return _FRESH[p["seed"]]


def inputs_data(p):
    seed = data_seed(p)
    x, y = digits(seed, "train")
    return {"x": x, "y": y, "seed": np.array(seed, dtype=np.int64)}


def _readonly(a):
    """An array on immutable bytes: no route (setflags included) makes it writable, so the student's code
    cannot keep its own data in the grader's arrays."""
    return np.frombuffer(np.ascontiguousarray(a).tobytes(), dtype=a.dtype).reshape(a.shape)


def plain_train(model, x, y, epochs, batch_size, lr, seed):
    """The handout's loop that does not fit: float32, the whole batch at once, AdamW (the reference run)."""
    import minigrad as mg
    from minigrad.nn import functional as F
    opt = mg.optim.AdamW(model.parameters(), lr=lr)
    rng = np.random.default_rng(seed)
    for _ in range(epochs):
        for rows in rng.permutation(len(x))[:len(x) // batch_size * batch_size].reshape(-1, batch_size):
            opt.zero_grad()
            F.cross_entropy(model(mg.tensor(x[rows])), mg.tensor(y[rows])).backward()
            opt.step()


def measure_baseline():
    """Run by the preamble, before any student cell: the plain loop's CPU seconds per trained sample, under the
    grader's meter like the student's run (tracing slows both alike), on random data of the task's shape (the
    speed of the loop does not depend on the values)."""
    from autograder._guard import meter
    rng = np.random.default_rng(0)
    x = rng.standard_normal((TRAIN_ROWS, FEATURES)).astype(np.float32)
    y = rng.integers(0, CLASSES, TRAIN_ROWS)
    model = build_model(0)
    with one_blas_thread(), meter():
        t0 = _cpu()
        plain_train(model, x, y, RECIPE["epochs"], RECIPE["batch_size"], RECIPE["lr"], 0)
        _BASELINE["per_sample"] = (_cpu() - t0) / SAMPLES


# ---- the parent's evaluation --------------------------------------------------------------------------
def _forward(weights, x):
    h = np.asarray(x, dtype=np.float64)
    for i in range(0, len(weights), 2):
        h = h @ np.asarray(weights[i], dtype=np.float64).T + np.asarray(weights[i + 1], dtype=np.float64)
        if i + 2 < len(weights):
            h = np.maximum(h, 0.0)
    return h


def cross_entropy(weights, x, y):
    z = _forward(weights, x)
    z = z - z.max(axis=1, keepdims=True)
    return float(np.mean(np.log(np.exp(z).sum(axis=1)) - z[np.arange(len(y)), y]))


def _weights(model):
    return [np.array(t.array, dtype=np.float32, copy=True) for t in model.parameters()]


_REFERENCE = {}                    # (seed, epochs, batch, lr) -> (reference run's loss, untrained model's)


def reference_loss(seed, epochs=RECIPE["epochs"], batch_size=RECIPE["batch_size"], lr=RECIPE["lr"]):
    """The validation loss of the reference run (the plain loop, float32, in the parent), and the untrained
    model's (computed once per process)."""
    key = (int(seed), epochs, batch_size, lr)
    if key not in _REFERENCE:
        x, y = digits(seed, "train")
        xv, yv = digits(seed, "test")
        model = build_model(seed)
        start = cross_entropy(_weights(model), xv, yv)
        with one_blas_thread():
            plain_train(model, x, y, epochs, batch_size, lr, seed)
        _REFERENCE[key] = (cross_entropy(_weights(model), xv, yv), start)
    return _REFERENCE[key]


def _shapes():
    out, width = [], FEATURES
    for _ in range(DEPTH):
        out += [(HIDDEN, width), (HIDDEN,)]
        width = HIDDEN
    return out + [(CLASSES, width), (CLASSES,)]


def _param_bytes():
    return 4 * sum(int(np.prod(s)) for s in _shapes())


# ---- part 1: one step from micro-batches ----------------------------------------------------------------
class GradientRecorder:
    """The optimizer the grader hands to train_step in part 1: it records the gradients it is asked to step
    with (as float64 copies) and changes nothing."""

    def __init__(self, params):
        self.params = list(params)
        self.param_groups = [{"params": self.params, "lr": 0.0}]
        self.steps = []

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    def step(self):
        self.steps.append([np.zeros(p.shape) if p.grad is None else np.array(p.grad.array, dtype=np.float64)
                           for p in self.params])


def inputs_step(p):
    x, y = digits(p["seed"], "train")
    rows = np.random.default_rng(p["seed"]).choice(len(x), p["batch"], replace=False)
    return {"x": x[rows], "y": y[rows]}


def _step_run(ns, case):
    import minigrad as mg
    model = build_model(case.params["seed"])
    rec = GradientRecorder(model.parameters())
    loss = ns.train_step(model, rec, mg.tensor(_readonly(case["x"])), mg.tensor(_readonly(case["y"])),
                         case.params["micro"])
    out = {"steps": np.array(len(rec.steps)), "loss": np.array(float(loss.item() if hasattr(loss, "item")
                                                                       else loss))}
    out.update({f"g{i}": g for i, g in enumerate(rec.steps[-1])} if rec.steps else {})
    return out


def observe_step(ns, case):
    return _step_run(ns, case)


def observe_step_peak(ns, case):
    """Two AdamW steps (the state is made at the first) on a model built inside the meter: every byte of the
    step counts, parameters, gradients and optimizer state included."""
    import minigrad as mg
    out = _step_run(ns, case)              # the gate: the same step's gradients must be right
    x, y = mg.tensor(_readonly(case["x"])), mg.tensor(_readonly(case["y"]))
    from autograder._guard import meter
    gc.collect()
    with one_blas_thread(), meter() as m:
        model = build_model(case.params["seed"])
        opt = mg.optim.AdamW(model.parameters(), lr=1e-3)
        for _ in range(2):
            ns.train_step(model, opt, x, y, case.params["micro"])
    out["peak"] = np.array(m.peak, dtype=np.int64)
    return out


def _full_batch_grads(case):
    """The full batch's mean-loss gradients, in float64 with minigrad (parent)."""
    import minigrad as mg
    from minigrad.nn import functional as F
    model = build_model(case.params["seed"]).to(mg.float64)
    with one_blas_thread():
        F.cross_entropy(model(mg.tensor(case["x"].astype(np.float64))), mg.tensor(case["y"])).backward()
    return [np.array(p.grad.array) for p in model.parameters()], model


def verdict_step(case, obs, ctx):
    steps = int(np.asarray(obs.get("steps", 0)))
    if steps != 1:
        return Verdict.fail(f"train_step called optimizer.step() {steps} times: one step per call, after every "
                            f"micro-batch's backward")
    expected, _ = _full_batch_grads(case)
    k = -(-len(case["y"]) // case.params["micro"])
    for i, e in enumerate(expected):
        got = np.asarray(obs.get(f"g{i}"))
        v = V.compare(f"the gradient of parameter {i} at optimizer.step()", got, e, what="gradient",
                      rtol=2e-3, atol=2e-6)
        if v.passed:
            continue
        if got.shape == e.shape and np.allclose(got, k * e, rtol=2e-3, atol=2e-6):
            return Verdict.fail(v.message + f"; it is {k}x the full batch's: scale each micro-batch's loss by its "
                                "share of the samples, len(micro-batch) / len(batch)")
        return v
    return Verdict.ok()


def verdict_step_peak(case, obs, ctx):
    gate = verdict_step(case, obs, ctx)
    if not gate.passed:
        return Verdict.fail("a small peak is credited only to a step whose gradients are right: " + gate.message)
    budget, peak = case.params["budget"], int(np.asarray(obs.get("peak")))
    msg = f"peak of two AdamW steps with micro-batches of {case.params['micro']}: {V.mib(peak)}, budget {V.mib(budget)}"
    if peak <= budget:
        return Verdict.ok(msg)
    return Verdict.fail(msg + f" ({peak / budget:.2f}x). Parameters, gradients and AdamW's m and v take "
                        f"{V.mib(4 * _param_bytes())}: the rest is what one micro-batch keeps alive. Free each "
                        f"micro-batch's graph before the next (do not keep its loss tensor, only a float)")


# ---- part 2: the training run under a budget ----------------------------------------------------------------
def observe_train(ns, case):
    """The student's train() on a model built inside the grader's meter; CPU and wall time from clocks bound
    before any student code; the trained weights copied out for the parent to evaluate."""
    import json
    key, train = json.dumps([case.params, int(case["seed"])], sort_keys=True), ns.train
    if key not in _RUNS or _RUNS[key][0] is not train:   # the tests of part 2 judge the same run of the same
        _RUNS[key] = (train, _train_run(ns, case))       # train(): it trains once per case
    return dict(_RUNS[key][1])


def _train_run(ns, case):
    import resource
    import threading
    from autograder._guard import IntegrityError, meter
    p, seed = case.params, int(case["seed"])
    x, y = _readonly(case["x"]), _readonly(case["y"])
    children, threads = resource.getrusage(resource.RUSAGE_CHILDREN), threading.active_count()
    gc.collect()
    with one_blas_thread(), meter() as m:
        model = build_model(seed)
        params = list(model.parameters())        # the grader's parameters, whatever train() does to `model`
        t0, w0 = _cpu(), _wall()
        ns.train(model, x, y, p["budget"], epochs=RECIPE["epochs"], batch_size=RECIPE["batch_size"],
                 lr=RECIPE["lr"], seed=seed)
        arrays = [t.array for t in params]       # read while timed and metered: nothing computes them later
        cpu, wall = _cpu() - t0, _wall() - w0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if after.ru_utime + after.ru_stime > children.ru_utime + children.ru_stime or threading.active_count() > threads:
        raise IntegrityError("train() did work in another process or thread, which the grader's meter and clocks "
                             "do not see: train in the process and thread that called it")
    if "per_sample" not in _BASELINE:   # the self-check (no preamble): measured now, in the notebook's process
        measure_baseline()
    if any(type(a) is not np.ndarray for a in arrays):
        raise IntegrityError("train() left a parameter whose .array is not a NumPy array: keep the model's "
                             "parameters as minigrad made them and train them in place")
    out = {f"w{i}": np.array(a, dtype=np.float32, copy=True) for i, a in enumerate(arrays)}
    out.update(peak=np.array(m.peak, dtype=np.int64), cpu=np.array(cpu), wall=np.array(wall),
               baseline=np.array(_BASELINE.get("per_sample", np.nan)))
    return out


def _val_loss(case, obs):
    """(validation loss or None, message): the parent evaluates the returned weights itself."""
    shapes = _shapes()
    weights = [np.asarray(obs.get(f"w{i}")) for i in range(len(shapes))]
    for i, (w, s) in enumerate(zip(weights, shapes)):
        if w.shape != s:
            return None, (f"parameter {i} of the trained model has shape {w.shape}, expected {s}: train the "
                          f"model you were given, in place, without replacing its layers")
    xv, yv = digits(int(case["seed"]), "test")
    loss = cross_entropy(weights, xv, yv)
    return (loss if np.isfinite(loss) else None), f"the validation loss is {loss:.4g}"


def _bound(seed):
    ref, start = reference_loss(seed)
    return ref * LOSS_SLACK[0] + LOSS_SLACK[1], ref, start


def verdict_loss(case, obs, ctx):
    loss, msg = _val_loss(case, obs)
    bound, ref, start = _bound(int(case["seed"]))
    if loss is not None and loss <= bound:
        return Verdict.ok(f"validation loss {loss:.4f} (the reference run: {ref:.4f}, bound {bound:.4f})")
    if loss is None and "shape" in msg:
        return Verdict.fail(msg)
    hint = ""
    if loss is None or loss > 0.8 * start:
        hint = (f"; the untrained model's is {start:.4f}: the weights barely moved. Does the optimizer step, "
                f"once per batch, with the accumulated gradients (zero_grad before the micro-batches, not "
                f"between them)?")
    return Verdict.fail(f"loss not reached: {msg} on the held-out digits, above the bound {bound:.4f} (the "
                        f"reference run, the plain float32 loop of the same recipe, reaches {ref:.4f}; the bound "
                        f"is {LOSS_SLACK[0]}x that + {LOSS_SLACK[1]}){hint}")


def verdict_budget(case, obs, ctx):
    loss, _ = _val_loss(case, obs)
    bound = _bound(int(case["seed"]))[0]
    if loss is None or loss > bound:
        return Verdict.fail("fitting the budget is credited only to a run that trains: the validation loss did not "
                            "reach its bound in this run (see 'reaches the validation loss')")
    budget, peak = case.params["budget"], int(np.asarray(obs.get("peak")))
    msg = f"peak {V.mib(peak)} during train(), budget {V.mib(budget)}"
    art = ctx.timeline("peak", {"peak": np.array([0, peak, 0])}, budget=budget, title=msg)
    if peak <= budget:
        return Verdict.ok(msg)
    state = 4 * _param_bytes()
    return Verdict.fail(f"over budget: {msg} ({peak / budget:.2f}x, {V.mib(peak - budget)} too much). The "
                        f"parameters, their gradients and AdamW's m and v take {V.mib(state)}; the other "
                        f"{V.mib(max(peak - state, 0))} is the batch: its activations, their gradients and the "
                        f"temporaries. Split each batch into micro-batches and accumulate (part 1), and choose "
                        f"the micro-batch size from the budget", [a for a in [art] if a])


def verdict_speed(case, obs, ctx):
    gate = verdict_budget(case, obs, ctx)
    if not gate.passed:
        return Verdict.fail("time under the budget is credited only to a run that fits the budget and reaches "
                            "the loss: " + gate.message.split(". ")[0])
    cpu, per_sample = float(np.asarray(obs.get("cpu"))), float(np.asarray(obs.get("baseline")))
    samples = SAMPLES
    plain = per_sample * samples
    speed = plain / max(cpu, 1e-9) if np.isfinite(plain) else float("nan")
    metrics = {"cpu_s": cpu, "wall_s": float(np.asarray(obs.get("wall"))), "speed_vs_plain": speed,
               "peak": int(np.asarray(obs.get("peak"))), "budget": case.params["budget"],
               "val_loss": _val_loss(case, obs)[0]}
    msg = (f"train() took {cpu:.2f} s of CPU ({samples / max(cpu, 1e-9):.0f} samples/s); the plain loop, measured "
           f"before your cells ran, takes {plain:.2f} s: {speed:.2f}x its speed")
    v = Verdict.ok(msg) if speed >= SPEED_FLOOR else Verdict.fail(
        msg + f", below {SPEED_FLOOR}x. Each micro-batch costs a Python round trip: use the largest micro-batch "
        f"the budget allows, and recompute or cast only where the memory is")
    v.metrics = metrics
    return v


def _c(params, label):
    return Case(params, label=label)


MIB = 1 << 20
BUDGET = int(1.4 * MIB)            # the public budget: the plain loop's peak is about 2 MiB
STEP_BUDGET = int(1.1 * MIB)

#: what autograder/leaderboard.py ranks: the CPU seconds of this test's run, re-measured by the kernel in fresh
#: children for the top entries; an entry qualifies with full marks on `qualify`
LEADERBOARD = {"test": "part2/time under the budget", "metric": "cpu_s", "lower_is_better": True,
               "qualify": ["part2/reaches the validation loss", "part2/fits the budget"], "top": 3, "repeats": 3,
               "review_above": {"speed_vs_plain": 1.5},   # faster than the plain float32 loop: does it train?
               "control": {"a11-train": "def train(model, x, y, budget, **recipe):\n    pass\n"}}

ASSIGNMENT = Assignment(
    id="a11",
    name="a11_capstone",
    title="Capstone: train under a memory budget",
    notebook="a11_capstone.ipynb",
    solution="solutions/a11_capstone.ipynb",
    preamble="import numpy as np\nimport minigrad as mg\nfrom minigrad import nn\nfrom minigrad.nn import functional "
             "as F\n__import__('autograder.assignments.a11_capstone', fromlist=['_']).measure_baseline()\n",
    timeout=60,
    memory_mb=2048,
    requirements=["scikit-learn"],
    summary="micro-batch gradients vs the full batch's in float64, a step's peak (the grader's meter); the "
            "trained weights' validation loss, computed by the grader on held-out digits (split, pixels and labels "
            "permuted by a seed drawn per grading), within 15 % + 0.05 of the reference run; the whole run's peak, "
            "model included, under the budget; CPU time vs the plain loop timed before student code; a leaderboard "
            "re-run by the grader",
    forbidden=["minigrad.budget", "minigrad.examples", "torch", "mmap", "*.memmap", "subprocess", "multiprocessing",
               "concurrent", "threading", "_thread", "*.fork"],
    parts=[
        Part("part1", "One step from micro-batches", cells=["a11-step"], names=["train_step"],
             stubs=["minigrad.budget.plan", "minigrad.budget.step", "minigrad.budget.trace"], tests=[
            Test("gradients equal the full batch's", 10, observe_step, verdict_step, inputs_step, partial=True,
                 cases=[_c({"seed": 1, "batch": 512, "micro": 128}, "512 as 4 x 128"),
                        _c({"seed": 2, "batch": 300, "micro": 64}, "300 as 4 x 64 + 44")]),
            Test("the peak of a step", 10, observe_step_peak, verdict_step_peak, inputs_step, cases=[
                _c({"seed": 3, "batch": 512, "micro": 64, "budget": STEP_BUDGET}, "512 as 8 x 64, 1.1 MiB")]),
        ]),
        Part("part2", "Train under the budget", cells=["a11-train"], names=["train"],
             stubs=["minigrad.budget.plan", "minigrad.budget.step", "minigrad.budget.trace"], tests=[
            Test("reaches the validation loss", 30, observe_train, verdict_loss, inputs_data, partial=True,
                 cases=[_c({"seed": "fresh", "budget": BUDGET}, "a fresh seed, 1.4 MiB")]),
            Test("fits the budget", 30, observe_train, verdict_budget, inputs_data, partial=True,
                 cases=[_c({"seed": "fresh", "budget": BUDGET}, "a fresh seed, 1.4 MiB")]),
            Test("time under the budget", 20, observe_train, verdict_speed, inputs_data,
                 cases=[_c({"seed": "fresh", "budget": BUDGET}, "a fresh seed, 1.4 MiB")]),
        ]),
    ],
)
