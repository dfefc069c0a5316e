"""Learning-rate schedules, as ``torch.optim.lr_scheduler`` (same classes, arguments and formulas).

Call ``scheduler.step()`` once per epoch (or per iteration, for schedules measured in steps) *after*
``optimizer.step()``. Building a scheduler already applies its value for step 0. ``get_last_lr()`` is
the list of current learning rates (one per param group); ``state_dict()``/``load_state_dict()`` resume it.

With ``base_lr`` the group's initial lr and t = ``last_epoch``:

=====================  =================================================================================
StepLR                 base_lr * gamma ** (t // step_size)
MultiStepLR            base_lr * gamma ** (number of milestones <= t)
ExponentialLR          base_lr * gamma ** t
CosineAnnealingLR      eta_min + (base_lr - eta_min) * (1 + cos(pi * t / T_max)) / 2
LambdaLR               base_lr * lr_lambda(t)
LinearLR               base_lr * (start_factor + (end_factor - start_factor) * min(t, total_iters) / total_iters)
ConstantLR             base_lr * factor for t < total_iters, then base_lr
SequentialLR           the i-th scheduler after milestone i-1 (restarted at its step 0)
OneCycleLR             warm up from max_lr/div_factor to max_lr over pct_start of total_steps, then anneal
                       to max_lr/(div_factor*final_div_factor) (cos or linear); momentum cycles inversely
=====================  =================================================================================

Warmup then cosine (the usual transformer schedule) is a combination::

    warmup = LinearLR(opt, start_factor=1 / (warmup_steps + 1), total_iters=warmup_steps)
    cosine = CosineAnnealingLR(opt, T_max=total_steps - warmup_steps, eta_min=min_lr)
    sched = SequentialLR(opt, [warmup, cosine], milestones=[warmup_steps])

``warmup_cosine(opt, warmup_steps, total_steps, min_lr=0)`` builds exactly that: for step t < warmup_steps
the lr is base_lr * (t + 1) / (warmup_steps + 1), at t = warmup_steps it is base_lr, and it then follows
the cosine down to ``min_lr`` at t = total_steps. Call ``sched.step()`` once per optimizer step.
"""
import abc
import math
import types
from bisect import bisect_right
from collections import Counter

from ..errors import ArgumentError

__all__ = ["LRScheduler", "StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "LambdaLR",
           "MultiplicativeLR", "LinearLR", "ConstantLR", "SequentialLR", "OneCycleLR", "warmup_cosine"]


class LRScheduler(abc.ABC):
    """Base class: subclasses define ``get_lr()`` (the chainable, recursive form, as PyTorch) and
    optionally ``_get_closed_form_lr()`` (used by ``step(epoch)``)."""

    def __init__(self, optimizer, last_epoch=-1):
        if not hasattr(optimizer, "param_groups"):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] when resuming "
                                   f"an optimizer")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self):
        self._step_count = 0
        self.step()

    @abc.abstractmethod
    def get_lr(self):
        """The learning rate of each param group at ``self.last_epoch`` (each schedule defines its own)."""

    def get_last_lr(self):
        """The learning rates set by the last ``step()`` (one per param group)."""
        return self._last_lr

    def step(self, epoch=None):
        self._step_count += 1
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = epoch
            values = self._get_closed_form_lr() if hasattr(self, "_get_closed_form_lr") else self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self):
        """Everything but the optimizer (and functions, which cannot be saved)."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)

    def _groups_lr(self):
        return [group["lr"] for group in self.optimizer.param_groups]


class LambdaLR(LRScheduler):
    """lr = base_lr * lr_lambda(epoch); ``lr_lambda`` a function or one per param group."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        n = len(optimizer.param_groups)
        if not isinstance(lr_lambda, (list, tuple)):
            self.lr_lambdas = [lr_lambda] * n
        else:
            if len(lr_lambda) != n:
                raise ArgumentError(f"Expected {n} lr_lambdas, but got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        super().__init__(optimizer, last_epoch)

    def state_dict(self):
        """lr_lambdas are saved only when they are callable objects (their ``__dict__``), not functions."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) else dict(fn.__dict__)
                               for fn in self.lr_lambdas]
        return state

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        lambdas = state_dict.pop("lr_lambdas")
        self.__dict__.update(state_dict)
        for fn, saved in zip(self.lr_lambdas, lambdas):
            if saved is not None:
                fn.__dict__.update(saved)

    def get_lr(self):
        return [base * fn(self.last_epoch) for fn, base in zip(self.lr_lambdas, self.base_lrs)]


class MultiplicativeLR(LRScheduler):
    """lr = lr * lr_lambda(epoch) at each step after the first."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        n = len(optimizer.param_groups)
        self.lr_lambdas = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) else [lr_lambda] * n
        if len(self.lr_lambdas) != n:
            raise ArgumentError(f"Expected {n} lr_lambdas, but got {len(self.lr_lambdas)}")
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch > 0:
            return [lr * fn(self.last_epoch) for fn, lr in zip(self.lr_lambdas, self._groups_lr())]
        return self._groups_lr()


class StepLR(LRScheduler):
    """Multiply the lr by ``gamma`` every ``step_size`` epochs."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._groups_lr()
        return [lr * self.gamma for lr in self._groups_lr()]

    def _get_closed_form_lr(self):
        return [base * self.gamma ** (self.last_epoch // self.step_size) for base in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Multiply the lr by ``gamma`` at each milestone epoch."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch not in self.milestones:
            return self._groups_lr()
        return [lr * self.gamma ** self.milestones[self.last_epoch] for lr in self._groups_lr()]

    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        self.milestones = Counter(self.milestones)   # a plain dict after mg.save / mg.load

    def _get_closed_form_lr(self):
        milestones = sorted(self.milestones.elements())
        return [base * self.gamma ** bisect_right(milestones, self.last_epoch) for base in self.base_lrs]


class ConstantLR(LRScheduler):
    """lr = base_lr * factor until ``total_iters`` epochs, then base_lr."""

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1):
        if factor > 1.0 or factor < 0:
            raise ArgumentError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor = factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        lrs = self._groups_lr()
        if self.last_epoch == 0:
            return [lr * self.factor for lr in lrs]
        if self.last_epoch != self.total_iters:
            return lrs
        return [lr * (1.0 / self.factor) for lr in lrs]

    def _get_closed_form_lr(self):
        return [base * (self.factor + (self.last_epoch >= self.total_iters) * (1 - self.factor))
                for base in self.base_lrs]


class LinearLR(LRScheduler):
    """Scale the lr linearly from ``start_factor * base_lr`` to ``end_factor * base_lr`` over ``total_iters``
    epochs (start_factor in (0, 1], end_factor in [0, 1])."""

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5, last_epoch=-1):
        if start_factor > 1.0 or start_factor <= 0:
            raise ArgumentError("Starting multiplicative factor expected to be greater than 0 and less or "
                                "equal to 1.")
        if end_factor > 1.0 or end_factor < 0:
            raise ArgumentError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        lrs = self._groups_lr()
        if self.last_epoch == 0:
            return [lr * self.start_factor for lr in lrs]
        if self.last_epoch > self.total_iters:
            return lrs
        s, e = self.start_factor, self.end_factor
        return [lr * (1.0 + (e - s) / (self.total_iters * s + (self.last_epoch - 1) * (e - s))) for lr in lrs]

    def _get_closed_form_lr(self):
        s, e = self.start_factor, self.end_factor
        return [base * (s + (e - s) * min(self.total_iters, self.last_epoch) / self.total_iters)
                for base in self.base_lrs]


class ExponentialLR(LRScheduler):
    """Multiply the lr by ``gamma`` every epoch."""

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0:
            return self._groups_lr()
        return [lr * self.gamma for lr in self._groups_lr()]

    def _get_closed_form_lr(self):
        return [base * self.gamma ** self.last_epoch for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """eta_min + (base_lr - eta_min) * (1 + cos(pi * t / T_max)) / 2 (SGDR without restarts).

    Computed recursively as PyTorch does (so it composes with other schedulers changing the lr); equal to
    the closed form when used alone. Past ``T_max`` the cosine continues (the lr rises again).
    """

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        t, T, eta = self.last_epoch, self.T_max, self.eta_min
        groups = self.optimizer.param_groups
        if t == 0:
            return [g["lr"] for g in groups]
        if self._step_count == 1 and t > 0:
            return [eta + (base - eta) * (1 + math.cos(t * math.pi / T)) / 2 for base in self.base_lrs]
        if (t - 1 - T) % (2 * T) == 0:
            return [g["lr"] + (base - eta) * (1 - math.cos(math.pi / T)) / 2
                    for base, g in zip(self.base_lrs, groups)]
        return [(1 + math.cos(math.pi * t / T)) / (1 + math.cos(math.pi * (t - 1) / T)) * (g["lr"] - eta) + eta
                for g in groups]

    def _get_closed_form_lr(self):
        t, T, eta = self.last_epoch, self.T_max, self.eta_min
        return [eta + (base - eta) * (1 + math.cos(math.pi * t / T)) / 2 for base in self.base_lrs]


class SequentialLR(LRScheduler):
    """Run ``schedulers`` one after the other, switching at ``milestones`` (len(schedulers) - 1 epochs).

    Each scheduler restarts at its own step 0 when its turn comes (PyTorch's semantics).
    """

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        if len(schedulers) < 1:
            raise ArgumentError("SequentialLR expects at least one scheduler")
        for i, s in enumerate(schedulers):
            if not hasattr(s, "optimizer"):
                raise TypeError(f"SequentialLR: scheduler at index {i} is not a scheduler")
            if s.optimizer is not optimizer:
                raise ArgumentError(f"SequentialLR: scheduler at index {i} has a different optimizer than the "
                                    f"one given")
        if len(milestones) != len(schedulers) - 1:
            raise ArgumentError(f"SequentialLR: expected {len(schedulers) - 1} milestones for "
                                f"{len(schedulers)} schedulers, got {len(milestones)}")
        self._schedulers = list(schedulers)
        self._milestones = list(milestones)
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        for group in optimizer.param_groups:          # reset to the initial lrs ...
            group["lr"] = group["initial_lr"]
        for s in self._schedulers:                    # ... undo the initial steps of the schedulers ...
            s.last_epoch -= 1
        self._schedulers[0]._initial_step()           # ... and redo the first one's only
        self._last_lr = self._schedulers[0].get_last_lr()

    def step(self):
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            scheduler.step(0)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()

    def get_lr(self):
        """The active child schedule's learning rates (it does the computing)."""
        return self._last_lr

    def state_dict(self):
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        saved = state_dict.pop("_schedulers")
        self.__dict__.update(state_dict)
        for s, sd in zip(self._schedulers, saved):
            s.load_state_dict(sd)


class OneCycleLR(LRScheduler):
    """The 1cycle policy (Smith & Topin), per batch: call ``step()`` after every optimizer step.

    lr goes from ``max_lr / div_factor`` up to ``max_lr`` during the first ``pct_start`` of ``total_steps``
    (or ``epochs * steps_per_epoch``), then down to ``initial_lr / final_div_factor``; with ``three_phase``
    it first comes back to the initial lr symmetrically, then anneals to the minimum. ``anneal_strategy``:
    'cos' or 'linear'. With ``cycle_momentum`` the momentum (SGD) or beta1 (Adam) moves inversely between
    ``max_momentum`` and ``base_momentum``.
    """

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None, pct_start=0.3,
                 anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85, max_momentum=0.95,
                 div_factor=25.0, final_div_factor=1e4, three_phase=False, last_epoch=-1):
        if total_steps is not None:
            if total_steps <= 0 or not isinstance(total_steps, int):
                raise ArgumentError(f"Expected positive integer total_steps, but got {total_steps}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            if not isinstance(epochs, int) or epochs <= 0:
                raise ArgumentError(f"Expected positive integer epochs, but got {epochs}")
            if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
                raise ArgumentError(f"Expected positive integer steps_per_epoch, but got {steps_per_epoch}")
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ArgumentError("You must define either total_steps OR (epochs AND steps_per_epoch)")
        if not 0 <= pct_start <= 1 or not isinstance(pct_start, float):
            raise ArgumentError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ArgumentError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        self._anneal = self._annealing_cos if anneal_strategy == "cos" else self._annealing_linear
        n = self.total_steps
        if three_phase:
            self._schedule_phases = [
                dict(end_step=float(pct_start * n) - 1, start_lr="initial_lr", end_lr="max_lr",
                     start_momentum="max_momentum", end_momentum="base_momentum"),
                dict(end_step=float(2 * pct_start * n) - 2, start_lr="max_lr", end_lr="initial_lr",
                     start_momentum="base_momentum", end_momentum="max_momentum"),
                dict(end_step=n - 1, start_lr="initial_lr", end_lr="min_lr",
                     start_momentum="max_momentum", end_momentum="max_momentum"),
            ]
        else:
            self._schedule_phases = [
                dict(end_step=float(pct_start * n) - 1, start_lr="initial_lr", end_lr="max_lr",
                     start_momentum="max_momentum", end_momentum="base_momentum"),
                dict(end_step=n - 1, start_lr="max_lr", end_lr="min_lr",
                     start_momentum="base_momentum", end_momentum="max_momentum"),
            ]
        groups = optimizer.param_groups
        max_lrs = _per_group("max_lr", max_lr, groups)
        if last_epoch == -1:
            for lr, group in zip(max_lrs, groups):
                group["initial_lr"] = lr / div_factor
                group["max_lr"] = lr
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ArgumentError("optimizer must support momentum or beta1 with `cycle_momentum` option enabled")
            self.use_beta1 = "betas" in optimizer.defaults
            max_ms = _per_group("max_momentum", max_momentum, groups)
            base_ms = _per_group("base_momentum", base_momentum, groups)
            if last_epoch == -1:
                for m_max, m_base, group in zip(max_ms, base_ms, groups):
                    if self.use_beta1:
                        group["betas"] = (m_max, *group["betas"][1:])
                    else:
                        group["momentum"] = m_max
                    group["max_momentum"] = m_max
                    group["base_momentum"] = m_base
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _annealing_cos(start, end, pct):
        return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)

    @staticmethod
    def _annealing_linear(start, end, pct):
        return (end - start) * pct + start

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_anneal")}

    def load_state_dict(self, state_dict):
        self.__dict__.update({k: v for k, v in state_dict.items() if k != "_anneal"})

    def get_lr(self):
        lrs = []
        step_num = self.last_epoch
        if step_num > self.total_steps:
            raise ArgumentError(f"Tried to step {step_num} times. The specified number of total steps is "
                                f"{self.total_steps}")
        for group in self.optimizer.param_groups:
            start_step = 0.0
            for i, phase in enumerate(self._schedule_phases):
                end_step = phase["end_step"]
                if step_num <= end_step or i == len(self._schedule_phases) - 1:
                    pct = (step_num - start_step) / (end_step - start_step)
                    lr = self._anneal(group[phase["start_lr"]], group[phase["end_lr"]], pct)
                    if self.cycle_momentum:
                        momentum = self._anneal(group[phase["start_momentum"]], group[phase["end_momentum"]], pct)
                    break
                start_step = phase["end_step"]
            lrs.append(lr)
            if self.cycle_momentum:
                if self.use_beta1:
                    group["betas"] = (momentum, *group["betas"][1:])
                else:
                    group["momentum"] = momentum
        return lrs


def _per_group(name, value, groups):
    if isinstance(value, (list, tuple)):
        if len(value) != len(groups):
            raise ArgumentError(f"expected {len(groups)} values for {name}, got {len(value)}")
        return list(value)
    return [value] * len(groups)


def warmup_cosine(optimizer, warmup_steps, total_steps, min_lr=0.0, start_factor=None):
    """Linear warmup for ``warmup_steps`` then cosine decay to ``min_lr`` at ``total_steps`` (per step).

    ``SequentialLR([LinearLR(start_factor, total_iters=warmup_steps), CosineAnnealingLR(T_max=total_steps -
    warmup_steps, eta_min=min_lr)], milestones=[warmup_steps])``; start_factor defaults to
    1 / (warmup_steps + 1), so the lr at step t < warmup_steps is base_lr * (t + 1) / (warmup_steps + 1).
    """
    if total_steps <= warmup_steps:
        raise ArgumentError(f"warmup_cosine: total_steps ({total_steps}) must exceed warmup_steps "
                            f"({warmup_steps})")
    if warmup_steps < 0:
        raise ArgumentError(f"warmup_cosine: warmup_steps must be >= 0, got {warmup_steps}")
    if warmup_steps == 0:
        return CosineAnnealingLR(optimizer, T_max=total_steps, eta_min=min_lr)
    if start_factor is None:
        start_factor = 1.0 / (warmup_steps + 1)
    warmup = LinearLR(optimizer, start_factor=start_factor, end_factor=1.0, total_iters=warmup_steps)
    cosine = CosineAnnealingLR(optimizer, T_max=total_steps - warmup_steps, eta_min=min_lr)
    return SequentialLR(optimizer, [warmup, cosine], milestones=[warmup_steps])


_LRScheduler = LRScheduler  # the old PyTorch name
