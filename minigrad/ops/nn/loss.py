"""Losses over classes: cross_entropy (fused, stable log-softmax + NLL) and nll_loss; the pointwise losses
(mse_loss, l1_loss, smooth_l1_loss, huber_loss, binary_cross_entropy, binary_cross_entropy_with_logits) are in
pointwise_loss.py and re-exported here.

Semantics follow PyTorch. For class-index targets with per-class ``weight`` w, ``ignore_index`` and label
smoothing eps over C classes, with logp = log_softmax(x, dim=1) and only non-ignored positions i:
    loss_i = (1 - eps) * (-w[y_i] logp[i, y_i]) + eps / C * (-sum_c w[c] logp[i, c])
    'mean' = sum_i loss_i / sum_i w[y_i]       (the weighted count of non-ignored targets; NaN if none)
For probability targets (floating, the logits' shape), t <- (1 - eps) t + eps / C,
loss_i = -sum_c w[c] t[i, c] logp[i, c] and 'mean' divides by the number of samples.
"""
from ...autograd.function import Function
from ...errors import ArgumentError, DTypeError, OpIndexError, ShapeError
from .._rules import composite_jvp, const
from ._util import (check_dtype_like, check_reduction, check_tensors, grad_scale, reduce_in_ops, reduce_loss, save,
                    saved)
from .pointwise_loss import (BinaryCrossEntropy, BinaryCrossEntropyWithLogits, MseLoss, SmoothL1Loss,  # noqa: F401
                             binary_cross_entropy, binary_cross_entropy_with_logits, huber_loss, l1_loss, mse_loss,
                             smooth_l1_loss)


def _log_softmax(xp, x, dim):
    shifted = x - x.max(axis=dim, keepdims=True)
    shifted -= xp.log(xp.exp(shifted).sum(axis=dim, keepdims=True))
    return shifted


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
        out, ctx.factor = reduce_loss(xp, loss, reduction, denom=w_t.sum())
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
        out, ctx.factor = reduce_loss(xp, loss, ctx.reduction)
        ctx.probs = True
        save(ctx, logp, wt, weight)
        return out[0] if ctx.reduction == "none" and len(ctx.x_shape) == 1 else out

    @staticmethod
    def backward(ctx, grad):
        xp, eps = ctx.xp, ctx.eps
        scale = grad_scale(grad, ctx.reduction, ctx.factor)
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

    @staticmethod
    def vjp(ctx, grad):
        # log_softmax is shift-invariant: the saved log-probabilities stand in for the logits (same
        # derivatives of every order), connected to the logits' place in the graph
        if ctx.probs:
            logp, wt, weight = saved(ctx)
            z = ctx.input_as(0, logp.array.reshape(ctx.x_shape))
            target = ctx.input_as(1, ctx.xp.zeros(ctx.x_shape, logp.array.dtype))
            w_b = 1.0 if weight is None else weight.detach().reshape(_classes_shape(logp))
            coef = (1.0 - ctx.eps) * w_b      # wt = target (1 - eps) w + constants: linear in the target
            fn = lambda z, t: _ce_probs(z, wt.detach().reshape(ctx.x_shape) + (t - t.detach()) * coef,  # noqa
                                        ctx.reduction, ctx.factor, ctx.x_shape)
            dx, dt = ctx.partials(fn, (z, target), grad, ctx.needs_input_grad[:2])
            return dx, dt, None
        logp, safe, valid, w_t, weight = saved(ctx)
        z = ctx.input_as(0, logp.array.reshape(ctx.x_shape))
        fn = lambda z: _ce_classes(z, safe.array, valid.array, w_t.detach(), weight, ctx.eps,  # noqa: E731
                                   ctx.reduction, ctx.factor, ctx.x_shape)
        return ctx.partials(fn, (z,), grad, ctx.needs_input_grad[:1])[0], None, None

    @staticmethod
    def jvp(primals, tangents, out, ignore_index, reduction, label_smoothing):
        x, target, weight = primals
        if _probability_targets(x.array, target.array):
            C = x.shape[0] if x.ndim == 1 else x.shape[1]
            w = None if weight is None else weight.detach().reshape(_classes_shape(x.array if x.ndim > 1 else x.array[None]))
            fn = lambda x, t: _ce_probs(  # noqa: E731
                x, (t * (1.0 - label_smoothing) + label_smoothing / C) * (1.0 if w is None else w), reduction,
                _factor(out, x, reduction), x.shape)
            return composite_jvp(fn, (x, target), tangents[:2])
        xd, _, safe, valid, w_t, _ = _class_targets(x.array, target.array, None if weight is None else weight.array,
                                                    ignore_index)
        fn = lambda x: _ce_classes(x, safe, valid, const(x, w_t), weight, label_smoothing, reduction,  # noqa
                                   None if reduction != "mean" else 1.0 / float(w_t.sum()), x.shape)
        return composite_jvp(fn, (x,), tangents[:1])


def _factor(out, x, reduction):
    return None if reduction != "mean" else 1.0 / (x.numel() // (x.shape[-1] if x.ndim == 1 else x.shape[1]))


def _ce_classes(z, safe, valid, w_t, weight, eps, reduction, factor, x_shape):
    """cross_entropy with class-index targets in minigrad ops (for higher order and forward mode)."""
    from .activation import log_softmax
    logp = log_softmax(z.reshape((1,) + tuple(x_shape)) if len(x_shape) == 1 else z, 1)
    loss = -(w_t * logp.gather(1, const(z, safe[:, None])).squeeze(1))
    if eps > 0:
        w_b = 1.0 if weight is None else weight.detach().reshape(_classes_shape(logp))
        smooth = -(logp * w_b).sum(dim=1) * const(z, valid.astype(logp.array.dtype))
        loss = loss * (1.0 - eps) + smooth * (eps / logp.shape[1])
    out = reduce_in_ops(loss, reduction, factor)
    return out[0] if reduction == "none" and len(x_shape) == 1 else out


def _ce_probs(z, wt, reduction, factor, x_shape):
    from .activation import log_softmax
    if len(x_shape) == 1:
        z, wt = z.reshape((1,) + tuple(x_shape)), wt.reshape((1,) + tuple(x_shape))
    out = reduce_in_ops(-(wt * log_softmax(z, 1)).sum(dim=1), reduction, factor)
    return out[0] if reduction == "none" and len(x_shape) == 1 else out


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
        out, ctx.factor = reduce_loss(xp, -(w_t * picked), reduction, denom=w_t.sum())
        ctx.C = C
        ctx.save_for_backward(safe, w_t)
        return out[0] if reduction == "none" and len(ctx.x_shape) == 1 else out

    @staticmethod
    def backward(ctx, grad):
        xp = ctx.xp
        safe, w_t = ctx.saved_tensors
        scale = grad_scale(grad, ctx.reduction, ctx.factor)
        if ctx.reduction == "none" and len(ctx.x_shape) == 1:
            scale = scale[None]
        onehot = xp.arange(ctx.C).reshape((1, ctx.C) + (1,) * (safe.ndim - 1)) == safe[:, None]
        dx = onehot * (-(w_t * scale))[:, None]
        return dx.reshape(ctx.x_shape), None, None

    @staticmethod
    def vjp(ctx, grad):   # linear in the input: the gradient depends on grad only
        safe, w_t = ctx.node.saved_tensors
        scale = grad if ctx.reduction == "none" else grad * ctx.factor
        if ctx.reduction == "none" and len(ctx.x_shape) == 1:
            scale = scale.reshape(1)
        onehot = ctx.xp.arange(ctx.C).reshape((1, ctx.C) + (1,) * (safe.ndim - 1)) == safe[:, None]
        dx = const(ctx, onehot * -w_t[:, None]) * (scale.unsqueeze(1) if scale.ndim else scale)
        return dx.reshape(ctx.x_shape), None, None

    @staticmethod
    def jvp(primals, tangents, out, ignore_index, reduction):
        return NllLoss.apply(tangents[0], primals[1], primals[2], ignore_index=ignore_index, reduction=reduction)


def nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):
    """Negative log-likelihood of log-probabilities (N, C, d1, ...) at class indices (N, d1, ...)."""
    check_tensors("nll_loss", input=input, target=target, weight=weight)
    check_reduction("nll_loss", reduction)
    _check_class_targets("nll_loss", input, target, weight, int(ignore_index))
    return NllLoss.apply(input, target, weight, ignore_index=int(ignore_index), reduction=reduction)
