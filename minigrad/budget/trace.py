"""Predicting a training step's memory from two small recorded steps.

A step allocates the same tensors in the same order at every batch size; only the sizes change, and each
size is affine in the (micro-)batch: a weight's gradient has the same size at any batch, an activation
grows by a fixed number of bytes per sample. So:

1. ``record_probe`` runs the planner's own ``TrainStep`` on a copy of the model at a tiny micro-batch
   ``b`` (two optimizer steps of two micro-batches each, on a fresh pool with its history on, phases
   marked) -- and again at ``2b``.
2. ``fit`` pairs the two recordings event by event and solves ``requested = a + s * batch`` per tensor.
3. ``StepModel.events(m, n_micro)`` writes down the step at any micro-batch ``m``: parameters first,
   then the recorded events with predicted sizes (with one micro-batch, the second pass is cut out).
4. ``simulate`` replays those events through minigrad's own ``CachingAllocator`` on a
   ``SimulatedSource`` (addresses only, no memory): the predicted peaks of allocated *and* reserved bytes,
   rounding, pools and fragmentation included, and what was live at the peak, by category.

``classify`` sorts each tensor into the categories lecture 02 teaches, from when it was made and when it
died (the phases are ``TrainStep``'s): *batch* (made in ``batch``), *activations* (made in ``forward`` and
still alive when ``backward`` starts: what backward needs, per segment), *gradients* (made in
``backward``, alive past it), *optimizer state* (made in ``optimizer``, alive past the step), *workspace*
(everything that dies in the phase that made it). Measured histories go through the same function.
"""
import bisect
import copy
import time
from collections import namedtuple

from ..memory import CachingAllocator, SimulatedSource, get_allocator, planner as static_planner, round_size
from .step import TrainStep

CATEGORIES = ("parameters", "optimizer state", "gradients", "batch", "activations", "workspace")

# One tensor of a step: requested bytes, made/died at event numbers, the phase (step, pass, name) of each,
# its memory label (segment) and op.
Tensor_ = namedtuple("Tensor_", "requested start end born died label op borrowed", defaults=(False,))
Phase = namedtuple("Phase", "step micro name")


class ProbeMismatch(RuntimeError):
    """The step did not allocate the same way at two batch sizes (a size-dependent code path)."""


def _clone(model, optimizer):
    """A deep copy of the model and an optimizer of the same kind and hyperparameters over it."""
    twin = copy.deepcopy(model)
    mapping = {id(p): q for p, q in zip(model.parameters(), twin.parameters())}
    groups = [{**{k: v for k, v in g.items() if k != "params"}, "params": [mapping[id(p)] for p in g["params"]]}
              for g in optimizer.param_groups]
    return twin, type(optimizer)(groups, **optimizer.defaults)


class PhaseMarks:
    """A ``TrainStep.on_phase`` that notes ``(event number, time, Phase)`` at each phase of each step in
    ``marks``; ``seq()`` gives the memory history's next event number."""

    def __init__(self, seq):
        self.seq, self.marks, self.step, self.micro = seq, [], -1, -1

    def __call__(self, name):
        if name == "zero_grad":
            self.step, self.micro = self.step + 1, -1
        elif name == "batch":
            self.micro += 1
        self.marks.append((self.seq(), time.perf_counter(), Phase(self.step, self.micro, name)))


def record_probe(model, optimizer, loss_fn, x, y, choice, segments, device, micro, steps=2):
    """Record ``steps`` optimizer steps of two micro-batches of ``micro`` samples (``x[:2*micro]``; one with
    ``optimizer_in_backward``) on a copy of the model; returns ``(tensors, phases, seconds)``: the step's tensors (``Tensor_``), the phase marks
    and the seconds each phase took."""
    twin, opt = _clone(model, optimizer)
    step = TrainStep(twin, opt, loss_fn, choice._replace(micro_batch=None if choice.optimizer_in_backward else micro),
                     segments, device)
    if step.scaler is not None:       # no skipped steps in the probe: the optimizer state must be made
        step.scaler = type(step.scaler)(init_scale=1.0)
    on_phase = PhaseMarks(lambda: get_allocator(device).history.seq)
    marks = on_phase.marks

    samples = micro if choice.optimizer_in_backward else 2 * micro      # (one pass: no accumulation)

    def run():
        be = step.device.backend
        for t in list(twin.parameters()) + list(getattr(twin, "buffers", lambda: [])()):
            t.array = be.adopt(t.array)      # the copy's parameters into the recorded pool, as in a real run
        step.on_phase = on_phase
        for _ in range(steps):
            step(x[:samples], y[:samples])

    trace = static_planner.record(run, device, tight=True)     # marks the op results a tight pool borrows
    seconds = {}
    for (_, t0, ph), (_, t1, _) in zip(marks, marks[1:]):
        seconds[ph.name] = seconds.get(ph.name, 0.0) + (t1 - t0) / steps
    return tensors_from_events(trace.events, marks), [m[2] for m in marks], seconds


def tensors_from_events(events, marks):
    """The step's tensors from a memory history and the phase marks ``[(seq, time, Phase), ...]``."""
    seqs = [m[0] for m in marks]

    def phase(seq):
        i = bisect.bisect_right(seqs, seq) - 1
        return marks[i][2] if i >= 0 else Phase(-1, -1, "before")
    live, out = {}, []
    end = events[-1]["seq"] + 1 if events else 0
    for e in events:
        if e["action"] == "alloc":
            live[e["address"]] = len(out)
            out.append([e["requested"], e["seq"], None, phase(e["seq"]), None, e["label"], e["op"],
                        e.get("borrowed", False)])
        elif e["action"] == "free" and e["address"] in live:
            i = live.pop(e["address"])
            out[i][2], out[i][4] = e["seq"], phase(e["seq"])
    for t in out:
        if t[2] is None:
            t[2], t[4] = end, Phase(10 ** 9, 0, "after")
    return [Tensor_(*t) for t in out]


def classify(t):
    """The category of one step tensor, and the label for activations (``"segment i"``)."""
    b, d = t.born, t.died
    if b.name == "before":
        return "parameters"
    if t.label == "optimizer":              # made by an optimizer step (run in backward, or after it)
        return "optimizer state" if d.step > b.step else "workspace"
    same_phase = (d.step, d.micro, d.name) == (b.step, b.micro, b.name)
    if b.name == "batch":
        return "batch"
    if b.name == "forward":
        return "workspace" if same_phase else "activations"
    if b.name == "backward":
        return "workspace" if (d.step, d.micro) == (b.step, b.micro) and d.name == "backward" else "gradients"
    if b.name == "optimizer":
        return "optimizer state" if d.step > b.step else "workspace"
    return "workspace"


class StepModel:
    """The step at any micro-batch: ``requested = base + slope * micro_batch`` for every recorded tensor."""

    def __init__(self, tensors, slopes, probe_micro, phases, seconds):
        self.tensors, self.slopes, self.b = tensors, slopes, probe_micro
        self.phases, self.seconds = phases, seconds

    def per_sample(self, select=None):
        """Bytes per sample of the tensors ``select(tensor)`` keeps (default: all)."""
        return sum(s for t, s in zip(self.tensors, self.slopes) if select is None or select(t))

    def events(self, micro, n_micro=1):
        """``[(action, key, bytes, tensor)]`` of the predicted run: the recorded steps (the parameters first)
        with sizes for ``micro`` samples; the second micro-batch of each step is cut out when ``n_micro``
        is 1 (its tensors are dropped, the frees it did of others are kept)."""
        order = []
        for k, (t, s) in enumerate(zip(self.tensors, self.slopes)):
            if n_micro == 1 and t.born.micro >= 1 and t.born.name in ("batch", "forward", "backward"):
                continue
            size = max(0, t.requested + s * (micro - self.b))
            order.append((t.start, "alloc", k, size, t))
            order.append((t.end, "free", k, size, t))
        order.sort(key=lambda e: (e[0], e[1] == "alloc"))
        return [(a, k, n, t) for _, a, k, n, t in order]


def fit(probe_a, probe_b, b):
    """A ``StepModel`` from probes at micro-batches ``b`` and ``2b`` (``(tensors, phases, seconds)`` each)."""
    (ta, pa, sa), (tb, _, _) = probe_a, probe_b
    if len(ta) != len(tb) or any((x.op, x.label, x.born, x.died) != (y.op, y.label, y.born, y.died)
                                 for x, y in zip(ta, tb)):
        raise ProbeMismatch(f"the step allocated differently at micro-batches {b} and {2 * b} "
                            f"({len(ta)} and {len(tb)} tensors)")
    slopes = []
    for x, y in zip(ta, tb):
        d = y.requested - x.requested
        slopes.append(d // b if d % b == 0 else d / b)
    return StepModel(ta, slopes, b, pa, sa)


Simulation = namedtuple("Simulation", "peak_allocated peak_reserved at_peak activations_by_label")
Simulation.__doc__ = """Predicted peaks in bytes: allocated (live tensors, each rounded up to 512 B as the
pool rounds them; the pool's own ``memory_allocated`` adds the unsplit tails of cached blocks, which depend
on what the cache held before) and reserved (segments held, what ``set_memory_limit`` caps); the bytes live
at the allocated peak by category, and activations live at the peak by memory label (segment)."""


def simulate(events, limit=None, tight=False):
    """Replay ``StepModel.events`` through a ``CachingAllocator`` with a ``SimulatedSource``; a ``limit``
    makes it raise ``OutOfMemoryError`` as the real pool would; ``tight``: the pool's tight mode (exact
    segments near the limit, op results borrowed as the probe recorded them)."""
    alloc = CachingAllocator(SimulatedSource(), "simulated")
    alloc.memory_limit, alloc.tight = limit, tight
    lender = SimulatedSource(base=1 << 48)             # addresses for borrowed memory
    live, now, best, best_live, peak_res = {}, 0, -1, None, 0
    for action, key, nbytes, t in events:
        if action == "alloc":
            size = round_size(max(int(nbytes), 1))
            block = alloc.borrow(size, lender.allocate(size)[0], None) if tight and t.borrowed else \
                alloc.malloc(size)
            live[key] = (block, size, t)
            now += size
            if now > best:
                best, best_live = now, list(live.values())
            peak_res = max(peak_res, alloc.reserved_bytes())
        else:
            block, size, _ = live.pop(key)
            alloc.free(block)
            now -= size
    cats, labels = dict.fromkeys(CATEGORIES, 0), {}
    for _, size, t in best_live or ():
        cat = classify(t)
        cats[cat] += size
        if cat == "activations":
            labels[t.label] = labels.get(t.label, 0) + size
    return Simulation(max(best, 0), peak_res, cats, labels)


def breakdown_at_peak(tensors, before=0):
    """Bytes live at the peak of a recorded history's tensors, by category (``before``: bytes already
    allocated when recording started, counted as parameters); returns ``(peak, categories, labels)``."""
    changes = []
    for k, t in enumerate(tensors):
        changes.append((t.start, 1, k))
        changes.append((t.end, -1, k))
    changes.sort()
    live, now, best, best_set = set(), before, before, set()
    for _, sign, k in changes:
        size = round_size(tensors[k].requested)
        if sign > 0:
            live.add(k)
            now += size
            if now > best:
                best, best_set = now, set(live)
        else:
            live.discard(k)
            now -= size
    cats, labels = dict.fromkeys(CATEGORIES, 0), {}
    cats["parameters"] = before
    for k in best_set:
        cat = classify(tensors[k])
        size = round_size(tensors[k].requested)
        cats[cat] += size
        if cat == "activations":
            labels[tensors[k].label] = labels.get(tensors[k].label, 0) + size
    return best, cats, labels
