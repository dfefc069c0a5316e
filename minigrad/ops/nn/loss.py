"""Losses: cross_entropy (fused, stable log-softmax + NLL), nll_loss, mse_loss, l1_loss, smooth_l1_loss,
huber_loss, binary_cross_entropy, binary_cross_entropy_with_logits.

Semantics follow PyTorch. For class-index targets with per-class ``weight`` w, ``ignore_index`` and label
smoothing eps over C classes, with logp = log_softmax(x, dim=1) and only non-ignored positions i:
    loss_i = (1 - eps) * (-w[y_i] logp[i, y_i]) + eps / C * (-sum_c w[c] logp[i, c])
    'mean' = sum_i loss_i / sum_i w[y_i]       (the weighted count of non-ignored targets; NaN if none)
For probability targets (floating, the logits' shape), t <- (1 - eps) t + eps / C,
loss_i = -sum_c w[c] t[i, c] logp[i, c] and 'mean' divides by the number of samples.
"""
import warnings

import numpy as np  # shape arithmetic only

from ...autograd.function import Function
from ...errors import ArgumentError, DTypeError, OpIndexError, ShapeError
from .._args import quiet
from ._util import check_dtype_like, check_reduction, check_tensors, save, saved
from .activation import stable_sigmoid


def _log_softmax(xp, x, dim):
    shifted = x - x.max(axis=dim, keepdims=True)
    shifted -= xp.log(xp.exp(shifted).sum(axis=dim, keepdims=True))
    return shifted


def _reduce(xp, loss, reduction, denom=None):
    """(result array, scale factor for backward)."""
    if reduction == "none":
        return loss, None
    total = loss.sum()
    if reduction == "sum":
        return xp.asarray(total, dtype=loss.dtype), 1.0
    n = float(loss.size if denom is None else denom)  # a Python float: never promotes float32
    if n == 0:
        return xp.asarray(xp.nan, dtype=loss.dtype), 0.0
    return xp.asarray(total / n, dtype=loss.dtype), 1.0 / n


def _weighted_reduce(ctx, xp, raw, weight, reduction):
    """The elementwise loss times ``weight`` (if any), reduced; records what backward needs to scale by."""
    loss = raw if weight is None else raw * weight
    out, ctx.factor = _reduce(xp, loss, reduction)
    ctx.reduction, ctx.loss_shape = reduction, loss.shape
    return out


def _grad_scale(grad, reduction, factor):
    """The per-element factor of d(result)/d(loss_i): grad itself for 'none', grad * factor otherwise."""
    return grad if reduction == "none" else (grad * factor).astype(grad.dtype, copy=False)


def _classes_shape(x):
    return (1, x.shape[1]) + (1,) * (x.ndim - 2)


# --- class-index targets: validation (on tensors) and the pieces both losses compute from -----------
def _check_weight(op, weight, C, x):
    if weight is not None and tuple(weight.shape) != (C,):
        raise ShapeError(f"{op}: weight must have shape ({C},) (one entry per class), got {tuple(weight.shape)}")


def _check_class_targets(op, x, target, weight, ignore_index):
    """(N, C, d...) inputs (or an unbatched (C,)) with (N, d...) integer class targets in range."""
    if x.ndim == 0:
        raise ShapeError(f"{op}: input must have a class dimension, got a 0-d input")
    t = target.array
    if t.dtype.kind not in "iu":
        raise DTypeError(f"{op}: expected integer class indices as target (int64), got {t.dtype} of "
                         f"shape {tuple(t.shape)}" + (
                             "; probability targets must have the input's shape "
                             f"{tuple(x.shape)}" if t.dtype.kind == "f" and op == "cross_entropy" else ""))
    shape = tuple(x.shape) if x.ndim > 1 else (1,) + tuple(x.shape)
    tshape = tuple(t.shape) if x.ndim > 1 or t.ndim else (1,)
    expected = (shape[0],) + shape[2:]
    if tshape != expected:
        raise ShapeError(f"{op}: target shape {tshape} does not match input shape {shape} "
                         f"(expected target shape {expected})")
    C = shape[1]
    _check_weight(op, weight, C, x)
    bad = (t != ignore_index) & ((t < 0) | (t >= C))
    if bad.any():
        raise OpIndexError(f"{op}: target {int(t[bad].reshape(-1)[0])} is out of bounds for {C} classes (input "
                           f"shape {shape}; valid targets are 0..{C - 1} or ignore_index={ignore_index})")


def _class_targets(x, target, weight, ignore_index):
    """(x, target, safe, valid, w_t, C): ``x`` and ``target`` batched (an unbatched (C,) input becomes
    (1, C)), ``safe`` = target with ignored entries set to 0 (usable as an index), ``valid`` the
    non-ignored mask and ``w_t`` = weight[target] * valid in x's dtype."""
    if x.ndim == 1:
        x, target = x[None], target[None] if target.ndim == 0 else target
    valid = target != ignore_index
    safe = target * valid  # ignored entries -> class 0 (any valid index; masked out below)
    w_t = valid.astype(x.dtype) if weight is None else weight[safe] * valid
    return x, target, safe, valid, w_t, x.shape[1]


class CrossEntropy(Function):
    name = "cross_entropy"

    @staticmethod
    def forward(ctx, x, target, weight, *, ignore_index, reduction, label_smoothing):
        check_dtype_like(ctx.name, "weight", weight, x)
        xp = ctx.xp
        ctx.x_shape, ctx.reduction, ctx.eps = x.shape, reduction, label_smoothing
        if _probability_targets(x, target):
            return CrossEntropy._forward_probs(ctx, x, target, weight)
        x, target, safe, valid, w_t, C = _class_targets(x, target, weight, ignore_index)
        eps = label_smoothing
        logp = ctx.fused.log_softmax(x, 1) if ctx.fused is not None else _log_softmax(xp, x, 1)
        picked = xp.take_along_axis(logp, safe[:, None], axis=1)[:, 0]
        loss = -(w_t * picked)
        if eps > 0:
            w_b = 1.0 if weight is None else weight.reshape(_classes_shape(x))
            smooth = -(logp * w_b).sum(axis=1) * valid
            loss = (1.0 - eps) * loss + (eps / C) * smooth
        out, ctx.factor = _reduce(xp, loss, reduction, denom=w_t.sum())
        ctx.probs = False
        save(ctx, logp, safe, valid, w_t, weight)
        return out[0] if reduction == "none" and len(ctx.x_shape) == 1 else out

    @staticmethod
    def _forward_probs(ctx, x, target, weight):
        xp = ctx.xp
        if x.ndim == 1:
            x, target = x[None], target[None]
        C = x.shape[1]
        eps = ctx.eps
        t = target * (1.0 - eps) + eps / C if eps > 0 else target
        wt = t if weight is None else t * weight.reshape(_classes_shape(x))
        logp = _log_softmax(xp, x, 1)
        loss = -(wt * logp).sum(axis=1)
        out, ctx.factor = _reduce(xp, loss, ctx.reduction)
        ctx.probs = True
        save(ctx, logp, wt, weight)
        return out[0] if ctx.reduction == "none" and len(ctx.x_shape) == 1 else out

    @staticmethod
    def backward(ctx, grad):
        xp, eps = ctx.xp, ctx.eps
        scale = _grad_scale(grad, ctx.reduction, ctx.factor)
        if ctx.reduction == "none" and len(ctx.x_shape) == 1:
            scale = scale[None]
        if ctx.probs:
            logp, wt, weight = saved(ctx)
            p = xp.exp(logp)
            s = scale[:, None] if ctx.reduction == "none" else scale
            dx = (p * wt.sum(axis=1, keepdims=True) - wt) * s if ctx.needs_input_grad[0] else None
            dt = None
            if ctx.needs_input_grad[1]:
                w_b = 1.0 if weight is None else weight.reshape(_classes_shape(logp))
                dt = (-(1.0 - eps) * w_b * logp) * s
                dt = dt.reshape(ctx.x_shape)
            return (None if dx is None else dx.reshape(ctx.x_shape)), dt, None
        logp, safe, valid, w_t, weight = saved(ctx)
        C = logp.shape[1]
        if ctx.fused is not None and logp.ndim == 2 and weight is None:  # GPU: one kernel
            target = xp.where(valid, safe, -1).astype(xp.int64)
            rows = xp.ascontiguousarray(xp.broadcast_to(scale, (logp.shape[0],)))
            dx = ctx.fused.cross_entropy_grad(logp, target, rows, eps)
            return dx.reshape(ctx.x_shape), None, None
        p = xp.exp(logp)
        onehot = xp.arange(C).reshape(_classes_shape(logp)) == safe[:, None]
        a = ((1.0 - eps) * w_t * scale)[:, None]               # nll part: a (p - onehot)
        dx = (p - onehot) * a
        if eps > 0:                                            # smoothing part: b (sum(w) p - w)
            b = ((valid * scale) * (eps / C))[:, None]
            if weight is None:
                dx += (C * p - 1.0) * b
            else:
                dx += (weight.sum() * p - weight.reshape(_classes_shape(logp))) * b
        return dx.reshape(ctx.x_shape), None, None


def _probability_targets(x, target):
    """cross_entropy's targets are class probabilities (not indices): floating, of the logits' shape."""
    return target.dtype.kind == "f" and tuple(target.shape) == tuple(x.shape)


def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """Fused, stable log_softmax + negative log-likelihood over dim 1 of logits (N, C, d1, ...).

    target: class indices (N, d1, ...) (integer) or class probabilities with the logits' shape (float).
    'mean' divides by the summed weight of the non-ignored targets (by the number of samples for
    probability targets). label_smoothing eps mixes the target with the uniform distribution over C classes.
    """
    check_tensors("cross_entropy", input=input, target=target, weight=weight)
    check_reduction("cross_entropy", reduction)
    if isinstance(label_smoothing, bool) or not isinstance(label_smoothing, (int, float)) \
            or not 0.0 <= label_smoothing <= 1.0:
        raise ArgumentError(f"cross_entropy: label_smoothing must be between 0.0 and 1.0, got "
                            f"{label_smoothing!r}")
    if _probability_targets(input.array, target.array):
        if input.ndim == 0:
            raise ShapeError("cross_entropy: input must have a class dimension, got a 0-d input")
        _check_weight("cross_entropy", weight, input.shape[1] if input.ndim > 1 else input.shape[0], input)
    else:
        _check_class_targets("cross_entropy", input, target, weight, int(ignore_index))
    return CrossEntropy.apply(input, target, weight, ignore_index=int(ignore_index), reduction=reduction,
                              label_smoothing=float(label_smoothing))


class NllLoss(Function):
    """loss_i = -w[y_i] * input[i, y_i] for log-probability inputs (N, C, d...)."""
    name = "nll_loss"

    @staticmethod
    def forward(ctx, x, target, weight, *, ignore_index, reduction):
        check_dtype_like(ctx.name, "weight", weight, x)
        xp = ctx.xp
        ctx.x_shape, ctx.reduction = x.shape, reduction
        x, target, safe, _, w_t, C = _class_targets(x, target, weight, ignore_index)
        picked = xp.take_along_axis(x, safe[:, None], axis=1)[:, 0]
        out, ctx.factor = _reduce(xp, -(w_t * picked), reduction, denom=w_t.sum())
        ctx.C = C
        ctx.save_for_backward(safe, w_t)
        return out[0] if reduction == "none" and len(ctx.x_shape) == 1 else out

    @staticmethod
    def backward(ctx, grad):
        xp = ctx.xp
        safe, w_t = ctx.saved_tensors
        scale = _grad_scale(grad, ctx.reduction, ctx.factor)
        if ctx.reduction == "none" and len(ctx.x_shape) == 1:
            scale = scale[None]
        onehot = xp.arange(ctx.C).reshape((1, ctx.C) + (1,) * (safe.ndim - 1)) == safe[:, None]
        dx = onehot * (-(w_t * scale))[:, None]
        return dx.reshape(ctx.x_shape), None, None


def nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):
    """Negative log-likelihood of log-probabilities (N, C, d1, ...) at class indices (N, d1, ...)."""
    check_tensors("nll_loss", input=input, target=target, weight=weight)
    check_reduction("nll_loss", reduction)
    _check_class_targets("nll_loss", input, target, weight, int(ignore_index))
    return NllLoss.apply(input, target, weight, ignore_index=int(ignore_index), reduction=reduction)


class MseLoss(Function):
    name = "mse_loss"

    @staticmethod
    def forward(ctx, a, b, *, reduction):
        d = a - b
        out, ctx.factor = _reduce(ctx.xp, d * d, reduction)
        ctx.reduction = reduction
        ctx.save_for_backward(d)
        return out

    @staticmethod
    def backward(ctx, grad):
        d, = ctx.saved_tensors
        g = d * (2.0 * _grad_scale(grad, ctx.reduction, ctx.factor))
        return g, (-g if ctx.needs_input_grad[1] else None)


def _check_pointwise_loss(op, a, b):
    """mse/l1/smooth_l1/huber: shapes that broadcast (a warning when they differ), one dtype."""
    try:
        shape = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise ShapeError(f"{op}: input shape {tuple(a.shape)} and target shape {tuple(b.shape)} cannot be "
                         f"broadcast together") from None
    if tuple(a.shape) != tuple(b.shape):
        warnings.warn(f"{op}: using a target size {tuple(b.shape)} that is different to the input size "
                      f"{tuple(a.shape)}; they will be broadcast to {tuple(shape)}, which is likely not "
                      f"what you want", UserWarning, stacklevel=3)
    if a.array.dtype != b.array.dtype:
        raise DTypeError(f"{op}: input dtype {a.array.dtype} differs from target dtype {b.array.dtype}")


def mse_loss(input, target, reduction="mean"):
    check_tensors("mse_loss", input=input, target=target)
    check_reduction("mse_loss", reduction)
    _check_pointwise_loss("mse_loss", input, target)
    return MseLoss.apply(input, target, reduction=reduction)


def l1_loss(input, target, reduction="mean"):
    """mean (or sum, or none) of |input - target|; composed: the gradient of abs at 0 is 0, as PyTorch's."""
    check_tensors("l1_loss", input=input, target=target)
    check_reduction("l1_loss", reduction)
    _check_pointwise_loss("l1_loss", input, target)
    d = (input - target).abs()
    return d if reduction == "none" else d.sum() if reduction == "sum" else d.mean()


class SmoothL1Loss(Function):
    """With d = x - t: 0.5 d^2 / beta where |d| < beta, |d| - 0.5 beta elsewhere (times ``scale``: the Huber
    loss with delta = beta is smooth_l1 * beta). beta = 0 is the L1 loss."""
    name = "smooth_l1_loss"

    @staticmethod
    def forward(ctx, a, b, *, reduction, beta, scale):
        xp = ctx.xp
        d = a - b
        ad = xp.abs(d)
        small = ad < beta
        loss = xp.where(small, (0.5 / beta if beta else 0.0) * d * d, ad - 0.5 * beta)
        if scale != 1.0:
            loss *= scale
        out, ctx.factor = _reduce(xp, loss, reduction)
        ctx.reduction, ctx.beta, ctx.scale = reduction, beta, scale
        ctx.save_for_backward(d, small)
        return out

    @staticmethod
    def backward(ctx, grad):
        xp = ctx.xp
        d, small = ctx.saved_tensors
        slope = xp.where(small, d * (1.0 / ctx.beta if ctx.beta else 0.0), xp.sign(d))
        g = slope * (ctx.scale * _grad_scale(grad, ctx.reduction, ctx.factor))
        return g, (-g if ctx.needs_input_grad[1] else None)


def _smooth_l1(op, input, target, reduction, beta, scale):
    check_tensors(op, input=input, target=target)
    check_reduction(op, reduction)
    _check_pointwise_loss(op, input, target)
    if isinstance(beta, bool) or not isinstance(beta, (int, float)) or beta < 0:
        raise ArgumentError(f"{op}: {'delta' if op == 'huber_loss' else 'beta'} must be a non-negative number, "
                            f"got {beta!r}")
    return SmoothL1Loss.apply(input, target, reduction=reduction, beta=float(beta), scale=float(scale))


def smooth_l1_loss(input, target, reduction="mean", beta=1.0):
    """Quadratic below ``beta``, linear above: 0.5 d^2 / beta if |d| < beta else |d| - 0.5 beta."""
    return _smooth_l1("smooth_l1_loss", input, target, reduction, beta, 1.0)


def huber_loss(input, target, reduction="mean", delta=1.0):
    """0.5 d^2 if |d| <= delta else delta (|d| - 0.5 delta): ``smooth_l1_loss`` with beta = delta, times delta."""
    if isinstance(delta, (int, float)) and not isinstance(delta, bool) and delta <= 0:
        raise ArgumentError(f"huber_loss: delta must be positive, got {delta!r}")
    return _smooth_l1("huber_loss", input, target, reduction, delta, delta)


class BinaryCrossEntropy(Function):
    """loss = -w [t log(x) + (1 - t) log(1 - x)] on probabilities x in [0, 1]; each log is clamped at -100
    (PyTorch's rule, so x = 0 or 1 gives a finite loss), and the gradient's denominator x (1 - x) at 1e-12."""
    name = "binary_cross_entropy"

    @staticmethod
    def forward(ctx, x, t, weight, *, reduction):
        for label, arr in (("target", t), ("weight", weight)):
            check_dtype_like(ctx.name, label, arr, x)
        xp = ctx.xp
        with quiet():       # log(0) = -inf, then clamped: PyTorch is silent here
            log_x = xp.maximum(xp.log(x), -100.0)
            log_1mx = xp.maximum(xp.log1p(-x), -100.0)
        raw = -(t * log_x + (1.0 - t) * log_1mx)
        save(ctx, x, t, weight, log_x, log_1mx, raw)
        return _weighted_reduce(ctx, xp, raw, weight, reduction)

    @staticmethod
    def backward(ctx, grad):
        xp = ctx.xp
        x, t, weight, log_x, log_1mx, raw = saved(ctx)
        need_x, need_t, need_w = ctx.needs_input_grad
        s = _grad_scale(grad, ctx.reduction, ctx.factor)
        sw = s if weight is None else s * weight
        dx = (x - t) / xp.maximum(x * (1.0 - x), 1e-12) * sw if need_x else None
        dt = (log_1mx - log_x) * sw if need_t else None
        dw = xp.broadcast_to(raw * s, ctx.loss_shape) if need_w else None
        return dx, dt, dw


def binary_cross_entropy(input, target, weight=None, reduction="mean"):
    """Binary cross-entropy of probabilities ``input`` (in [0, 1]) against ``target`` (same shape);
    ``weight`` rescales each element (broadcast). Prefer ``binary_cross_entropy_with_logits`` on logits."""
    op = "binary_cross_entropy"
    check_tensors(op, input=input, target=target, weight=weight)
    check_reduction(op, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ShapeError(f"{op}: target size {tuple(target.shape)} must be the same as input size "
                         f"{tuple(input.shape)}")
    x = input.array
    if bool(((x < 0) | (x > 1)).any()):
        raise ArgumentError(f"{op}: all elements of input should be between 0 and 1 (got values outside; "
                            f"apply sigmoid first, or use binary_cross_entropy_with_logits on logits)")
    return BinaryCrossEntropy.apply(input, target, weight, reduction=reduction)


class BinaryCrossEntropyWithLogits(Function):
    """loss = (1 - t) x + lw * softplus(-x), lw = 1 + (pos_weight - 1) t, all times weight.

    softplus(-x) = log1p(exp(-|x|)) + max(-x, 0) never overflows, so huge logits give finite losses.
    """
    name = "binary_cross_entropy_with_logits"

    @staticmethod
    def forward(ctx, x, t, weight, pos_weight, *, reduction):
        for label, arr in (("target", t), ("weight", weight), ("pos_weight", pos_weight)):
            check_dtype_like(ctx.name, label, arr, x)
        xp = ctx.xp
        sp = xp.log1p(xp.exp(-xp.abs(x))) + xp.maximum(-x, 0)
        lw = None if pos_weight is None else 1.0 + (pos_weight - 1.0) * t
        raw = (1.0 - t) * x + (sp if lw is None else lw * sp)
        save(ctx, x, t, weight, pos_weight, sp, raw)
        return _weighted_reduce(ctx, xp, raw, weight, reduction)

    @staticmethod
    def backward(ctx, grad):
        xp = ctx.xp
        x, t, weight, pos_weight, sp, raw = saved(ctx)
        need_x, need_t, need_w, need_pw = ctx.needs_input_grad
        s = _grad_scale(grad, ctx.reduction, ctx.factor)
        sw = s if weight is None else s * weight
        dx = dt = dw = dpw = None
        if need_x:  # d/dx = (1 - t) - lw * sigmoid(-x)
            sig_neg = stable_sigmoid(xp, -x)
            lw = 1.0 if pos_weight is None else 1.0 + (pos_weight - 1.0) * t
            dx = ((1.0 - t) - lw * sig_neg) * sw
        if need_t:  # d/dt = -x + (pos_weight - 1) softplus(-x)
            dt = (-x if pos_weight is None else (pos_weight - 1.0) * sp - x) * sw
        if need_w:
            dw = xp.broadcast_to(raw * s, ctx.loss_shape)
        if need_pw:
            dpw = xp.broadcast_to(t * sp * sw, ctx.loss_shape)
        return dx, dt, dw, dpw


def _check_bce_with_logits(x, t, weight, pos_weight):
    op = "binary_cross_entropy_with_logits"
    if tuple(t.shape) != tuple(x.shape):
        raise ShapeError(f"{op}: target size {tuple(t.shape)} must be the same as input size {tuple(x.shape)}")


def binary_cross_entropy_with_logits(input, target, weight=None, reduction="mean", pos_weight=None):
    """Sigmoid + binary cross-entropy in the stable form (finite for huge logits).

    loss = weight * [(1 - t) x + (1 + (pos_weight - 1) t) * softplus(-x)]."""
    check_tensors("binary_cross_entropy_with_logits", input=input, target=target, weight=weight,
                  pos_weight=pos_weight)
    check_reduction("binary_cross_entropy_with_logits", reduction)
    _check_bce_with_logits(input, target, weight, pos_weight)
    return BinaryCrossEntropyWithLogits.apply(input, target, weight, pos_weight, reduction=reduction)
