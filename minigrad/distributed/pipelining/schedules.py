"""Pipeline schedules: in which order each stage runs its micro-batches' forwards (F) and backwards (B).

A schedule is an *order* — a list of ("F", mb) / ("B", mb) per stage — and one loop that runs any order
(``PipelineSchedule.step``). With p stages and m micro-batches:

    GPipe  stage s: F0 F1 ... F(m-1)  B0 B1 ... B(m-1)        keeps m micro-batches' activations
    1F1B   stage s: p-s-1 warm-up forwards, then F and B alternating, then the remaining Bs
                                                               keeps at most p-s micro-batches' activations
Both idle (p-1)/(m+p-1) of the time in the pipeline's fill and drain ("bubble"); 1F1B's gain is memory.
Gradients come out as for the whole batch: each micro-batch's loss is scaled by 1/m before its backward.
"""
import abc
import time

from ...autograd.grad_mode import no_grad
from ...errors import ArgumentError, ShapeError
from ...ops import cat

__all__ = ["gpipe_order", "one_f_one_b_order", "PipelineSchedule", "ScheduleGPipe", "Schedule1F1B",
           "bubble_fraction"]


def gpipe_order(stage, num_stages, n_microbatches):
    """All forwards, then all backwards."""
    return [("F", i) for i in range(n_microbatches)] + [("B", i) for i in range(n_microbatches)]


def one_f_one_b_order(stage, num_stages, n_microbatches):
    """Warm-up forwards, then one forward one backward, then the remaining backwards."""
    warmup = min(num_stages - stage - 1, n_microbatches)
    order = [("F", i) for i in range(warmup)]
    for f in range(warmup, n_microbatches):
        order += [("F", f), ("B", f - warmup)]
    return order + [("B", b) for b in range(n_microbatches - warmup, n_microbatches)]


class PipelineSchedule(abc.ABC):
    """``Schedule(stage, n_microbatches, loss_fn=None)``; ``step(*inputs, target=None, losses=None)``: the first
    stage passes the whole batch's inputs, the last its ``target``; ``losses`` (a list) receives each
    micro-batch's loss on the last stage, which also gets the concatenated output back."""

    @staticmethod
    @abc.abstractmethod
    def order(stage, num_stages, n_microbatches):
        """The (kind, micro-batch) steps this stage runs, in order: each schedule's one definition."""

    def __init__(self, stage, n_microbatches, loss_fn=None):
        if n_microbatches < 1:
            raise ArgumentError(f"{type(self).__name__}: n_microbatches must be >= 1, got {n_microbatches}")
        if stage.is_last and loss_fn is None:
            raise ArgumentError(f"{type(self).__name__}: the last stage needs a loss_fn")
        self.stage, self.n_microbatches, self.loss_fn = stage, n_microbatches, loss_fn
        self.step_start = self.step_end = None

    def _split(self, tensors, what):
        m = self.n_microbatches
        chunks = []
        for t in tensors:
            if t.shape[0] % m:
                raise ShapeError(f"{type(self).__name__}: {what} has {t.shape[0]} rows, which do not split into "
                                 f"{m} equal micro-batches")
            chunks.append(t.split(t.shape[0] // m, dim=0))
        return [tuple(c[i] for c in chunks) for i in range(m)]

    def step(self, *args, target=None, losses=None):
        stage, m = self.stage, self.n_microbatches
        stage._reset()
        inputs = self._split(args, "the input") if stage.is_first else [()] * m
        if stage.is_first and not args:
            raise ArgumentError(f"{type(self).__name__}.step: the first stage needs the batch's inputs")
        if stage.is_last and target is None:
            raise ArgumentError(f"{type(self).__name__}.step: the last stage needs target=")
        targets = [t[0] for t in self._split([target], "target")] if stage.is_last else [None] * m
        outputs, step_losses = {}, {}
        self.step_start = time.perf_counter()
        for action, mb in self.order(stage.stage_index, stage.num_stages, m):
            if action == "F":
                out, loss = stage.forward_one_chunk(mb, inputs[mb], targets[mb], self.loss_fn, 1.0 / m)
                if stage.is_last:
                    outputs[mb], step_losses[mb] = out.detach(), loss.detach()
            elif action == "B":
                stage.backward_one_chunk(mb)
            else:
                raise ArgumentError(f"{type(self).__name__}: unknown action {action!r} (use 'F' or 'B')")
        stage.finish()
        self.step_end = time.perf_counter()
        if stage._stash:
            raise ArgumentError(f"{type(self).__name__}: micro-batches {sorted(stage._stash)} ran forward but never "
                                f"backward")
        if not stage.is_last:
            return None
        if losses is not None:
            losses.extend(step_losses[i] for i in range(m))
        with no_grad():
            return cat([outputs[i] for i in range(m)], dim=0)


class ScheduleGPipe(PipelineSchedule):
    order = staticmethod(gpipe_order)


class Schedule1F1B(PipelineSchedule):
    order = staticmethod(one_f_one_b_order)


def bubble_fraction(timelines):
    """Idle share of the pipeline from every stage's timeline (a list, one per stage): 1 - mean busy time /
    span, span from the first action's start to the last one's end on any stage (one clock: CLOCK_MONOTONIC
    is shared by the processes of one machine). Theory: (p-1)/(m+p-1) for equal stages."""
    start = min(e["start"] for t in timelines for e in t)
    end = max(e["end"] for t in timelines for e in t)
    busy = [sum(e["end"] - e["start"] for e in t) for t in timelines]
    return 1.0 - sum(busy) / len(busy) / (end - start)
