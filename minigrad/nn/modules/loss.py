"""Losses as modules: CrossEntropyLoss, NLLLoss, MSELoss, L1Loss, SmoothL1Loss, HuberLoss, BCELoss,
BCEWithLogitsLoss (``loss_fn(input, target)``).

A per-class ``weight`` (and BCE's ``pos_weight``) is a buffer, so it follows ``.to(device)`` and is saved in
``state_dict`` as in PyTorch.
"""
from ...ops.nn._util import check_reduction
from .. import functional as F
from ..module import Module


class _Loss(Module):
    def __init__(self, reduction="mean"):
        super().__init__()
        check_reduction(type(self).__name__, reduction)
        self.reduction = reduction

    def extra_repr(self):
        return "" if self.reduction == "mean" else f"reduction={self.reduction!r}"


class _WeightedLoss(_Loss):
    def __init__(self, weight=None, reduction="mean"):
        super().__init__(reduction)
        self.register_buffer("weight", weight)


class CrossEntropyLoss(_WeightedLoss):
    """log_softmax over dim 1 of logits (N, C, d...) + negative log-likelihood of class-index targets
    (N, d...) or class-probability targets (the logits' shape); ``weight`` per class, ``ignore_index``,
    ``label_smoothing`` as PyTorch."""

    def __init__(self, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        super().__init__(weight, reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)

    def extra_repr(self):
        parts = [] if self.reduction == "mean" else [f"reduction={self.reduction!r}"]
        if self.ignore_index != -100:
            parts.append(f"ignore_index={self.ignore_index}")
        if self.label_smoothing:
            parts.append(f"label_smoothing={self.label_smoothing}")
        return ", ".join(parts)


class NLLLoss(_WeightedLoss):
    """Negative log-likelihood of log-probabilities (N, C, d...) at class indices (N, d...)."""

    def __init__(self, weight=None, ignore_index=-100, reduction="mean"):
        super().__init__(weight, reduction)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class MSELoss(_Loss):
    """mean (or sum, or none) of (input - target)^2."""

    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """mean (or sum, or none) of |input - target|."""

    def forward(self, input, target):
        return F.l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """0.5 d^2 / beta where |d| < beta, |d| - 0.5 beta elsewhere (d = input - target)."""

    def __init__(self, reduction="mean", beta=1.0):
        super().__init__(reduction)
        self.beta = beta

    def forward(self, input, target):
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """0.5 d^2 where |d| <= delta, delta (|d| - 0.5 delta) elsewhere (d = input - target)."""

    def __init__(self, reduction="mean", delta=1.0):
        super().__init__(reduction)
        self.delta = delta

    def forward(self, input, target):
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class BCELoss(_WeightedLoss):
    """Binary cross-entropy of probabilities (after a sigmoid); ``weight`` rescales each element."""

    def forward(self, input, target):
        return F.binary_cross_entropy(input, target, weight=self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """Sigmoid + binary cross-entropy in one stable op; ``weight`` per element, ``pos_weight`` per class."""

    def __init__(self, weight=None, reduction="mean", pos_weight=None):
        super().__init__(reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(input, target, self.weight, reduction=self.reduction,
                                                  pos_weight=self.pos_weight)
