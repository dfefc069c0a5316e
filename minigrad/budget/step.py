"""One optimizer step run the way a ``Choice`` says: autocast or not, which segments recomputed, how many
micro-batches with gradient accumulation. The planner records this very code at small batches to predict
its memory, and training runs it: what was predicted is what runs.

    step = TrainStep(model, optimizer, F.cross_entropy, Choice(autocast=True, recompute=(0, 1),
                                                                micro_batch=32))
    loss = step(x, y)            # zero_grad, 4 x (forward, backward) for a batch of 128, optimizer step

A step goes through named phases in this order, reported to ``on_phase(name)`` when set (the planner
marks its memory history with them): ``zero_grad``, then per micro-batch ``batch`` (the micro-batch is
copied to the device when ``x`` is a NumPy array), ``forward``, ``backward``, then ``optimizer`` and
``end``. Segment ``i``'s forward runs inside ``minigrad.memory.label("segment i")``, so memory history
attributes activations to segments.
"""
import math
from collections import namedtuple

import numpy as np

from .. import memory
from ..amp import GradScaler, autocast
from ..backend import dtypes
from ..backend.device import device as as_device

from ..errors import ArgumentError
from ..nn import Sequential
from ..tensor import Tensor, tensor
from ..utils.checkpoint import checkpoint

PHASES = ("zero_grad", "batch", "forward", "backward", "optimizer", "end")


class Choice(namedtuple("Choice", "autocast recompute micro_batch optimizer_in_backward bf16_state")):
    """How to run a step: ``autocast`` (float16 where the policy says), ``recompute`` (indices of the
    segments whose activations are recomputed in backward), ``micro_batch`` (samples per forward/backward;
    None: the whole batch at once), ``optimizer_in_backward`` (each parameter is updated as soon as its
    gradient is ready, and the gradient freed: the gradients of the whole model never exist at once;
    whole batch and float32 only, since accumulation and the loss scaler need every gradient first),
    ``bf16_state`` (the optimizer keeps its moments in bfloat16: ``bf16_state`` of Adam/AdamW)."""

    def __new__(cls, autocast=False, recompute=(), micro_batch=None, optimizer_in_backward=False,
                bf16_state=False):
        return super().__new__(cls, bool(autocast), tuple(sorted(set(recompute))), micro_batch,
                               bool(optimizer_in_backward), bool(bf16_state))

    def accumulation(self, batch):
        """Micro-batches per step for a batch of ``batch`` samples."""
        return 1 if self.micro_batch is None else math.ceil(batch / self.micro_batch)

    def describe(self, batch=None):
        parts = ["autocast float16" if self.autocast else "float32"]
        parts.append(f"recompute segments {','.join(map(str, self.recompute))}" if self.recompute
                     else "no recomputation")
        if self.micro_batch is not None and (batch is None or self.micro_batch < batch):
            parts.append(f"micro-batch {self.micro_batch}" + (f" x {self.accumulation(batch)}" if batch else ""))
        else:
            parts.append("whole batch")
        if self.optimizer_in_backward:
            parts.append("optimizer in backward")
        if self.bf16_state:
            parts.append("bfloat16 optimizer state")
        return ", ".join(parts)


def default_segments(model):
    """Segments of a Sequential as ``[(start, stop), ...]`` over its children: a segment starts at each
    child with parameters that follows one without (Linear+ReLU+Dropout, Conv+BatchNorm+ReLU+Pool+Flatten),
    so recomputing a segment keeps only its input."""
    children = _sequence(model)
    if not children:
        return [(0, 0)]
    bounds = [0]
    for k in range(1, len(children)):
        has = _has_params(children[k])
        if has and not _has_params(children[k - 1]):
            bounds.append(k)
    bounds.append(len(children))
    return list(zip(bounds[:-1], bounds[1:]))


def _sequence(model):
    """The children of a Sequential (whose forward is running them in order); [] for any other model,
    which then runs whole, as one segment."""
    return list(model.children()) if isinstance(model, Sequential) else []


def _has_params(module):
    return any(True for _ in module.parameters())


def _run(modules):
    def segment(x):
        for m in modules:
            x = m(x)
        return x
    return segment


def _autocast_run(run, device_type):
    def segment(x):
        with autocast(device_type=device_type, dtype=dtypes.float16):
            return run(x)
    return segment


class TrainStep:
    """``step(x, y)``: one optimizer step on the batch ``(x, y)`` under ``choice``; returns the batch's
    mean loss (a float). ``loss_fn(output, target)`` must return the *mean* over its samples (micro-batch
    losses are weighted by their share of the batch, so accumulated gradients equal the whole batch's).

    ``segments``: ``[(start, stop), ...]`` over ``model``'s children (default ``default_segments``); a
    model without children runs whole and cannot recompute. ``scaler``: the ``GradScaler`` used under
    autocast (default: a new one); without autocast none is used.
    """

    def __init__(self, model, optimizer, loss_fn, choice=None, segments=None, device=None, scaler=None):
        self.model, self.optimizer, self.loss_fn = model, optimizer, loss_fn
        self.choice = Choice() if choice is None else choice
        self.children = _sequence(model)
        self.segments = default_segments(model) if segments is None else [tuple(s) for s in segments]
        bad = [i for i in self.choice.recompute if not 0 <= i < len(self.segments)]
        if bad or (self.choice.recompute and not self.children):
            raise ArgumentError(f"TrainStep: cannot recompute segments {bad or list(self.choice.recompute)}: the "
                                f"model has {len(self.segments) if self.children else 0} segments")
        if self.choice.micro_batch is not None and self.choice.micro_batch < 1:
            raise ArgumentError(f"TrainStep: micro_batch must be >= 1, got {self.choice.micro_batch}")
        params = list(model.parameters())
        self.device = as_device(device) if device is not None else (params[0].device if params else as_device("cpu"))
        self.scaler = (scaler or GradScaler()) if self.choice.autocast else None
        self.on_phase = None        # callable(phase name), e.g. the planner's recorder
        if "bf16_state" in optimizer.defaults:           # the optimizer's moments in the dtype chosen
            for group in optimizer.param_groups:
                group["bf16_state"] = self.choice.bf16_state
            optimizer.cast_state()                       # existing moments converted now, not mid-step
        elif self.choice.bf16_state:
            raise ArgumentError(f"TrainStep: {type(optimizer).__name__} cannot keep its state in bfloat16")
        self.optimizers = {}        # parameter -> (its own optimizer, its group), with optimizer_in_backward
        if self.choice.optimizer_in_backward:
            if self.choice.autocast:
                raise ArgumentError("TrainStep: optimizer_in_backward needs float32 (the loss scaler checks "
                                    "every gradient before any update)")
            # PyTorch's recipe: one optimizer per parameter, of the same kind, stepped by a post-accumulate-
            # grad hook. Each shares the given optimizer's state (so its state_dict has everything) and
            # reads its group's settings at every step (so a scheduler's learning rate applies)
            for group in optimizer.param_groups:
                opts = {k: v for k, v in group.items() if k != "params"}
                for p in group["params"]:
                    one = type(optimizer)([{**opts, "params": [p]}], **optimizer.defaults)
                    one.state = optimizer.state
                    self.optimizers[p] = (one, group)

    def _phase(self, name):
        if self.on_phase is not None:
            self.on_phase(name)

    def _step_one(self, p):
        """A parameter's gradient is complete: update it with its own optimizer, then free the gradient."""
        one, group = self.optimizers[p]
        one.param_groups[0].update((k, v) for k, v in group.items() if k != "params")
        with memory.label("optimizer"):
            one.step()
        p.grad = None

    def forward(self, x):
        """The model's output, each segment recomputed in backward if the choice says so."""
        if not self.children:
            return self.model(x)
        for i, (start, stop) in enumerate(self.segments):
            run = _run(self.children[start:stop])
            with memory.label(f"segment {i}"):
                if i in self.choice.recompute:
                    # the recomputation runs in backward, outside the autocast region: the segment enters
                    # autocast itself so that it recomputes in the dtypes its forward saved
                    x = checkpoint(_autocast_run(run, self.device.type) if self.choice.autocast else run, x,
                                   use_reentrant=False)
                else:
                    x = run(x)
        return x

    def __call__(self, x, y):
        n = len(x)
        if n == 0 or len(y) != n:
            raise ArgumentError(f"TrainStep: x and y must hold the same, non-zero number of samples "
                                f"(got {len(x)} and {len(y)})")
        m = n if self.choice.micro_batch is None else min(self.choice.micro_batch, n)
        if self.optimizers and m < n:
            raise ArgumentError(f"TrainStep: optimizer_in_backward needs the whole batch in one pass "
                                f"(micro_batch {m} < {n} samples)")
        self._phase("zero_grad")
        self.optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for start in range(0, n, m):
            self._phase("batch")
            xb, yb = _tensor(x[start:start + m], self.device), _tensor(y[start:start + m], self.device)
            self._phase("forward")
            with autocast(device_type=self.device.type, dtype=dtypes.float16, enabled=self.choice.autocast):
                out = self.forward(xb)
            # the loss in float32, outside the region (as PyTorch advises): every loss, whatever the policy
            loss = self.loss_fn(out.float() if out.dtype == dtypes.float16 else out, yb) * (len(yb) / n)
            del out
            self._phase("backward")
            handles = [p.register_post_accumulate_grad_hook(self._step_one) for p in self.optimizers]
            try:
                (self.scaler.scale(loss) if self.scaler is not None else loss).backward()
            finally:
                for h in handles:
                    h.remove()
            total += loss.item()
            del loss, xb, yb
        self._phase("optimizer")
        with memory.label("optimizer"):
            if self.optimizers:
                pass                              # every parameter was updated during backward
            elif self.scaler is not None:
                self.scaler.step(self.optimizer)
                self.scaler.update()
            else:
                self.optimizer.step()
        self._phase("end")
        return total


def _tensor(a, device):
    """A micro-batch on ``device``: a Tensor slice stays a view; a NumPy slice is copied to the device."""
    if isinstance(a, Tensor):
        return a if a.device == device else a.to(device)
    return tensor(np.ascontiguousarray(a), device=device)
