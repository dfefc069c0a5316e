"""``plan_training``: the cheapest way to run a training step under a memory budget, and why.

    plan = plan_training(model, optimizer, F.cross_entropy, x, y, budget=48 * 2**20)
    print(plan.explain())                     # predicted bytes per category, every option's peak and time
    step = plan.step()                        # a TrainStep that runs the chosen combination
    for x, y in batches: step(x, y)
    print(plan.explain(plan.measure(x, y)))   # the same table with measured bytes beside the predicted

The options (lecture 02's breakdown says what each attacks): **autocast** (activations in float16),
**recomputation** of segments (their activations are rebuilt in backward: one more forward of the segment),
**micro-batches** with gradient accumulation (activations of one micro-batch at a time: more, smaller
steps). For every combination the peak comes from ``trace.py`` (two tiny recorded steps, extrapolated
and replayed through the caching allocator) and the time from forward times measured at every micro-batch
size: a pass is about three forwards (forward + a backward twice as long) plus the fixed cost the probes
show, a recomputed segment adds its forward again, the optimizer's time is measured once. **Optimizer in
backward** (each parameter updated, and its gradient freed, as soon as the gradient is complete) is a
fourth option, for float32 and the whole batch; **bfloat16 optimizer state** (AdamW's moments at 2 bytes
each, float32 maths, stochastic rounding: ``bf16_state``) a fifth, for float32 compute. Every prediction
replays the pool's *tight* mode (``set_memory_limit(budget, tight=True)``: segments of just the block,
NumPy's results borrowed instead of copied), the mode a budgeted run uses: a combination fits when its
peak reserved memory does, or when the tight pool runs it under the limit without running out. The
fastest combination that fits wins; segments are recomputed in
the order of most activation bytes saved per second of recomputation (the source's "switch recomputation
on above a memory threshold": the first segments only when the budget requires them).
"""
import gc
import math

import numpy as np
import time
from collections import namedtuple

from .. import memory
from ..amp import autocast
from ..autograd.grad_mode import no_grad
from ..backend import dtypes
from ..backend.device import device as as_device
from ..errors import ArgumentError, OutOfMemoryError
from ..memory import format_bytes, round_size
from ..memory.history import MemoryHistory
from ..random import get_rng_state, set_rng_state
from . import trace
from .step import Choice, TrainStep, _run, _sequence, _tensor, default_segments


class BudgetError(OutOfMemoryError):
    """No combination of the options fits the budget; the message says how much is missing and where."""


Candidate = namedtuple("Candidate", "choice peak_allocated peak_reserved seconds fits sim events", defaults=(None,))
Candidate.__doc__ = """One combination: its peaks with no limit (the tight pool's), predicted seconds, whether it fits,
its simulation (under the limit when it fits only thanks to the tight pool's exact segments) and the
predicted events (to simulate it again under another budget)."""
Measurement = namedtuple("Measurement", "peak_allocated peak_reserved categories activations seconds steps")
Measurement.__doc__ = """Measured on the real pool: peaks (bytes), bytes live at the allocated peak by
category and activations by segment, seconds per step (median after the first), steps run."""


def _forward_seconds(model, segments, x, device, use_autocast, repeats=3):
    """Seconds of each segment's forward on ``x`` (min of ``repeats``), in training mode, without a graph."""
    children = _sequence(model)
    runs = [_run(children[a:b]) for a, b in segments] if children else [model]
    best = [math.inf] * len(runs)
    with no_grad(), autocast(device_type=device.type, dtype=dtypes.float16, enabled=use_autocast):
        for _ in range(repeats):
            h = x
            for i, run in enumerate(runs):
                t0 = time.perf_counter()
                h = run(h)
                if hasattr(h, "array"):
                    h.array.sum()                      # finish (a no-op on NumPy; a device sync on a GPU)
                best[i] = min(best[i], time.perf_counter() - t0)
    return best


class BudgetPlan:
    """What ``plan_training`` chose (``choice``), its prediction (``predicted``: a ``trace.Simulation``),
    every combination considered (``candidates``, fastest first) and the data to explain it."""

    def __init__(self, model, optimizer, loss_fn, budget, device, batch, segments, candidates, chosen):
        self.model, self.optimizer, self.loss_fn = model, optimizer, loss_fn
        self.budget, self.device, self.batch, self.segments = budget, device, batch, segments
        self.candidates, self.chosen = candidates, chosen
        self.choice, self.predicted = chosen.choice, chosen.sim
        self.baseline = next((c for c in candidates if c.choice == Choice(micro_batch=batch)), candidates[-1])

    def step(self, scaler=None, compact=True):
        """A ``TrainStep`` running the chosen combination on the planned model and optimizer. ``compact``:
        first pack the model's parameters and buffers and the optimizer's state at the front of the pool
        (``compact``), the layout the prediction starts from."""
        if compact:
            self.compact()
        return TrainStep(self.model, self.optimizer, self.loss_fn, self.choice, self.segments, self.device,
                         scaler)

    def compact(self):
        """Move the model's parameters and buffers, then the optimizer's state, out of the pool and back in,
        in that order, after releasing the cache: they end up packed as in a fresh pool, the layout the
        prediction starts from, instead of among the holes their initialisation left. Each tensor keeps
        its identity (its ``.array`` is replaced by an equal array); gradients are dropped, as the next
        step's ``zero_grad`` would drop them. Returns the bytes the pool reserves afterwards."""
        self.optimizer.zero_grad(set_to_none=True)
        for p in self.model.parameters():
            p.grad = None
        tensors = list(self.model.parameters()) + list(getattr(self.model, "buffers", lambda: [])())
        tensors += [v for state in self.optimizer.state.values() for v in state.values() if hasattr(v, "array")]
        be = self.device.backend
        host = [be.to_host(t.array).copy() for t in tensors]
        for t, h in zip(tensors, host):
            t.array = h                                    # off the pool: its blocks are free now
        gc.collect()
        memory.empty_cache(self.device)
        alloc = memory.get_allocator(self.device)
        tight, alloc.tight = alloc.tight, True             # each its own segment, as the probes recorded them
        try:
            for t, h in zip(tensors, host):
                t.array = be.adopt(be.asarray(h)) if be.xp is not np else be.adopt(h)
        finally:
            alloc.tight = tight
        return memory.memory_reserved(self.device)

    def measure(self, x, y, steps=3, step=None, batches=None):
        """Run ``steps`` training steps on ``(x, y)`` (or one on each ``(x, y)`` of ``batches``) with ``step``
        (default a new ``self.step()``) on the real pool, tight (as the prediction assumes: see
        ``set_memory_limit``), with its history on; returns a ``Measurement``.
        Trains the model: these are real steps. Empties the pool's cache first, so that reserved bytes
        start where the prediction starts."""
        batches = [(x, y)] * steps if batches is None else list(batches)
        steps = len(batches)
        self.optimizer.zero_grad(set_to_none=True)       # what the step does first: no stale gradients
        step = self.step() if step is None else step
        if not memory.is_enabled(self.device):
            raise ArgumentError(f"measure: the memory pool is not enabled on {self.device} "
                                f"(minigrad.memory.enable('{self.device}') before building the model)")
        alloc = memory.get_allocator(self.device)
        gc.collect()
        memory.empty_cache(self.device)
        memory.reset_peak_memory_stats(self.device)
        before = _live_bytes(self.device)
        state_before = _state_bytes(self.optimizer)
        hist, times = MemoryHistory(max_entries=None), []
        on_phase = trace.PhaseMarks(lambda: hist.seq)
        marks = on_phase.marks
        previous, alloc.history, step.on_phase = alloc.history, hist, on_phase
        tight, alloc.tight = alloc.tight, True             # the pool the prediction replays
        try:
            for xb, yb in batches:
                t0 = time.perf_counter()
                step(xb, yb)
                times.append(time.perf_counter() - t0)
        finally:
            alloc.history, step.on_phase, alloc.tight = previous, None, tight
        tensors = trace.tensors_from_events([dict(e) for e in hist.events], marks)
        peak, cats, labels = trace.breakdown_at_peak(tensors, before)
        cats["parameters"] -= state_before
        cats["optimizer state"] += state_before
        later = sorted(times[1:]) or times
        return Measurement(peak, memory.max_memory_reserved(self.device), cats, labels, later[len(later) // 2],
                           steps)

    def explain(self, measured=None):
        """The choice explained: bytes by category at the peak (predicted, and measured if given), then
        every combination considered with its predicted peak and step time against the default's."""
        p, b = self.predicted, self.batch
        lines = [f"budget {format_bytes(self.budget)} on {self.device}, batch {b}: {self.choice.describe(b)}",
                 f"  (the default, {self.baseline.choice.describe(b)}, needs "
                 f"{format_bytes(self.baseline.peak_reserved)} reserved)", ""]
        head = f"{'at the peak':<28s}{'predicted':>12s}" + (f"{'measured':>12s}" if measured else "")
        lines += [head, "-" * len(head)]

        def row(name, pred, meas=None):
            lines.append(f"{name:<28s}{format_bytes(pred):>12s}" + (f"{format_bytes(meas):>12s}" if measured else ""))
        for cat in trace.CATEGORIES:
            row(cat, p.at_peak[cat], measured.categories[cat] if measured else None)
            if cat == "activations":
                for lab in sorted(set(p.activations_by_label) | set(measured.activations if measured else ()),
                                  key=lambda s: (s is None, str(s))):
                    row(f"  {lab or 'loss and output'}", p.activations_by_label.get(lab, 0),
                        measured.activations.get(lab, 0) if measured else None)
        row("peak allocated", p.peak_allocated, measured.peak_allocated if measured else None)
        row("peak reserved (the budget)", p.peak_reserved, measured.peak_reserved if measured else None)
        t = f"{self.chosen.seconds * 1e3:.1f} ms" + (f" (measured {measured.seconds * 1e3:.1f} ms)" if measured else "")
        lines += [f"step time (predicted)       {t}", "",
                  f"combinations considered ({len(self.candidates)}; the fastest that fits for each setting "
                  f"of autocast and recomputation; predicted time against the default's):",
                  f"  {'combination':<60s}{'reserved':>11s}{'time':>8s}  fits"]
        base = self.baseline.seconds
        for c in self.summary():
            mark = "  <- chosen" if c is self.chosen else ""
            lines.append(f"  {c.choice.describe(b):<60s}{format_bytes(c.peak_reserved):>11s}"
                         f"{c.seconds / base:>7.2f}x  {'yes' if c.fits else 'no'}{mark}")
        return "\n".join(lines)

    def with_budget(self, budget, headroom=None):
        """The same candidates chosen from again for another budget (no new probes); raises
        ``BudgetError`` when none fits."""
        limit = budget - _headroom(budget, headroom)
        cands = [_fit(c, limit) for c in self.candidates]
        return _choose(self.model, self.optimizer, self.loss_fn, budget, self.device, self.batch,
                       self.segments, cands, limit)

    def with_choice(self, choice):
        """The plan for one of the candidates (``choice``: a ``Choice`` planned for), fitting or not."""
        plan = BudgetPlan(self.model, self.optimizer, self.loss_fn, self.budget, self.device, self.batch,
                          self.segments, self.candidates, next(c for c in self.candidates if c.choice == choice))
        return plan

    def for_model(self, model, optimizer):
        """This plan for another model and optimizer of the same architecture and kind (a fresh copy to
        train from the start, say): the prediction holds for it as it is."""
        return BudgetPlan(model, optimizer, self.loss_fn, self.budget, self.device, self.batch, self.segments,
                          self.candidates, self.chosen)

    def summary(self):
        """The candidates worth a line: the default, the chosen one, and for every setting of autocast and
        recomputation (and optimizer in backward, bfloat16 state) the fastest micro-batch size that fits (or,
        if none fits, the smallest peak)."""
        keep = {self.baseline.choice, self.chosen.choice}
        groups = {}
        for c in self.candidates:                       # fastest first
            ch = c.choice
            groups.setdefault((ch.autocast, ch.recompute, ch.optimizer_in_backward, ch.bf16_state), []).append(c)
        for cands in groups.values():
            fits = [c for c in cands if c.fits]
            keep.add(fits[0].choice if fits else min(cands, key=lambda c: c.peak_reserved).choice)
        return [c for c in self.candidates if c.choice in keep]

    def __repr__(self):
        return (f"BudgetPlan({self.choice.describe(self.batch)}; predicted peak reserved "
                f"{format_bytes(self.predicted.peak_reserved)} of {format_bytes(self.budget)})")


def _state_bytes(optimizer):
    """Bytes of the optimizer's state tensors that live in the pool (rounded as the pool rounds them)."""
    return sum(round_size(v.array.nbytes) for state in optimizer.state.values() for v in state.values()
               if hasattr(v, "array") and memory.block_of(v.array) is not None)


def _live_bytes(device):
    """Bytes of the live blocks, each rounded up to 512 B as requested (not the blocks' possibly larger
    sizes): the measure the prediction makes."""
    alloc = memory.get_allocator(device)
    return sum(round_size(b.requested) for seg in alloc.segments.values() for b in seg.blocks() if b.allocated)


def headroom_for(budget):
    """Bytes of the budget kept free for what the prediction cannot see (tensors other than the model's
    in the pool, a different order of frees): 5 %."""
    return budget // 20


def plan_training(model, optimizer, loss_fn, x, y, budget, *, device=None, segments=None, autocast_options=(False, True),
                  probe_batch=2, headroom=None):
    """Choose how to train ``model`` with ``optimizer`` on batches like ``(x, y)`` under ``budget`` bytes of
    the device's pool (peak reserved, what ``set_memory_limit`` caps); returns a ``BudgetPlan``.

    ``x``, ``y``: one batch (NumPy arrays or tensors; only its size and sample shapes matter, plus a few
    samples the probes run on). ``loss_fn(output, target)``: a mean loss. ``segments``: recomputation
    units over a Sequential's children (default ``default_segments``). ``headroom``: bytes of the budget
    kept free for what the prediction does not see (default ``headroom_for(budget)``). Raises
    ``BudgetError`` when nothing fits.
    The model and optimizer are not changed (probes run on copies) and the random state is restored.
    """
    params = list(model.parameters())
    device = as_device(device) if device is not None else (params[0].device if params else as_device("cpu"))
    n = len(x)
    if budget is None or budget <= 0:
        raise ArgumentError(f"plan_training: budget must be a positive number of bytes, got {budget!r}")
    if n < 2 * probe_batch:
        raise ArgumentError(f"plan_training: the batch ({n} samples) must hold at least {2 * probe_batch} "
                            f"for the probes (probe_batch={probe_batch})")
    segments = default_segments(model) if segments is None else [tuple(s) for s in segments]
    can_recompute = bool(_sequence(model))
    rng = get_rng_state()
    try:
        candidates = _candidates(model, optimizer, loss_fn, x, y, device, segments, probe_batch,
                                 autocast_options, can_recompute, budget - _headroom(budget, headroom))
    finally:
        set_rng_state(rng)
    return _choose(model, optimizer, loss_fn, budget, device, n, segments, candidates,
                   budget - _headroom(budget, headroom))


def _fit(c, limit, sim=None):
    """``c`` with ``fits`` and ``sim`` for ``limit``: it fits when its peak does, or when the tight pool
    (exact segments near the limit) runs it under the limit without running out. ``sim``: ``c``'s
    simulation without a limit, if already made."""
    sim = trace.simulate(c.events, None, tight=True) if sim is None else sim
    if sim.peak_reserved > limit:
        try:
            return c._replace(fits=True, sim=trace.simulate(c.events, limit, tight=True))
        except OutOfMemoryError:
            pass
    return c._replace(fits=sim.peak_reserved <= limit, sim=sim)


def _choose(model, optimizer, loss_fn, budget, device, n, segments, candidates, limit):
    fitting = [c for c in candidates if c.fits]
    if not fitting:
        raise BudgetError(_no_fit_message(candidates, budget, limit, n))
    chosen = min(fitting, key=lambda c: (c.seconds, c.peak_reserved))
    if chosen.peak_reserved > budget:       # the run is limited to the budget (tight): predict that run
        chosen = chosen._replace(sim=trace.simulate(chosen.events, budget, tight=True))
    candidates = [chosen if c.choice == chosen.choice else c for c in candidates]
    return BudgetPlan(model, optimizer, loss_fn, budget, device, n, segments, candidates, chosen)


def _has_low_precision_state(optimizer):
    """Does the optimizer keep its state in bfloat16 on request (``bf16_state``, as Adam/AdamW)?"""
    return "bf16_state" in optimizer.defaults


def _headroom(budget, headroom):
    return headroom_for(budget) if headroom is None else headroom


def _candidates(model, optimizer, loss_fn, x, y, device, segments, b, ac_options, can_recompute, limit):
    n = len(x)
    micros = sorted({math.ceil(n / 2 ** j) for j in range(int(math.log2(n)) + 1)} | {n}, reverse=True)
    twin, _ = trace._clone(model, optimizer)
    out = []
    for ac in ac_options:
        # forward seconds of each segment at every micro-batch size (and the probes'), measured: small
        # batches cost more per sample (per-op overhead, small matrix products) than a straight line says
        fwd = {m: _forward_seconds(twin, segments, _tensor(x[:m], device), device, ac, repeats=2)
               for m in sorted(set(micros) | {b})}

        # bfloat16 optimizer state (half the state's bytes, a slower update) where the optimizer offers it;
        # with float32 compute only, to keep planning short
        for lp in ((False, True) if not ac and _has_low_precision_state(optimizer) else (False,)):
            def probe(recompute, in_backward=False):
                ch = Choice(ac, recompute, None, in_backward, lp)
                pa = trace.record_probe(model, optimizer, loss_fn, x, y, ch, segments, device, b)
                pb = trace.record_probe(model, optimizer, loss_fn, x, y, ch, segments, device, 2 * b)
                return trace.fit(pa, pb, b)
            base = probe(())
            # one measurement of the optimizer's time per dtype setting: it does not depend on the batch
            opt_seconds = base.seconds.get("optimizer", 0.0) + base.seconds.get("zero_grad", 0.0)
            # a pass (forward + backward, about three forwards) also pays a fixed cost the forward alone does
            # not show (the loss, the backward engine, reading the loss): what the probe's pass took beyond
            # three forwards at b samples
            probe_pass = sum(base.seconds.get(k, 0.0) for k in ("batch", "forward", "backward")) / 2
            extra = max(probe_pass - 3 * sum(fwd[b]), 0.0)
            order = []
            if can_recompute:
                saved = [base.per_sample(lambda t, i=i: trace.classify(t) == "activations"
                                         and t.label == f"segment {i}") for i in range(len(segments))]
                order = sorted((i for i in range(len(segments) - 1) if saved[i] > 0),
                               key=lambda i: -saved[i] / max(fwd[n][i], 1e-9))
            for k in range(len(order) + 1):
                recompute = tuple(order[:k])
                sm = base if k == 0 else probe(recompute)
                for m, in_bwd in [(m, False) for m in micros] + ([(n, True)] if not ac else []):
                    n_micro = math.ceil(n / m)
                    events = (probe(recompute, True) if in_bwd else sm).events(m, n_micro)
                    sim = trace.simulate(events, None, tight=True)
                    per_pass = extra + 3 * sum(fwd[m]) + sum(fwd[m][i] for i in recompute)
                    seconds = n_micro * per_pass + opt_seconds
                    out.append(_fit(Candidate(Choice(ac, recompute, m, in_bwd, lp), sim.peak_allocated,
                                              sim.peak_reserved, seconds, None, sim, events), limit, sim))
    out.sort(key=lambda c: (c.seconds, c.peak_reserved))
    return out


def _no_fit_message(candidates, budget, limit, n):
    # the tight pool's floor is the allocated peak (each block its own segment, nothing cached)
    best = min(candidates, key=lambda c: (c.peak_allocated, c.peak_reserved))
    cats = best.sim.at_peak
    static = cats["parameters"] + cats["optimizer state"] + cats["gradients"]
    parts = ", ".join(f"{k} {format_bytes(v)}" for k, v in cats.items() if v)
    where = (f"parameters, gradients and optimizer state alone take {format_bytes(static)}"
             + (" (more than the budget: train a smaller model, or use a smaller optimizer state)"
                if static > budget else ""))
    room = budget - limit
    return (f"plan_training: no combination fits the budget of {format_bytes(budget)} ({format_bytes(room)} of "
            f"it kept as headroom): the smallest, {best.choice.describe(n)}, needs "
            f"{format_bytes(best.peak_allocated)} allocated at its peak, even in the tight pool "
            f"({format_bytes(best.peak_reserved)} reserved with its cache), "
            f"{format_bytes(best.peak_allocated - limit)} missing. At its peak: {parts}; {where}.")
