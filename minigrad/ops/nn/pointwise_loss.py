"""Pointwise losses: mse_loss, l1_loss, smooth_l1_loss, huber_loss, binary_cross_entropy,
binary_cross_entropy_with_logits (each element's loss from the same element of input and target, then
reduced: 'mean', 'sum' or 'none', as PyTorch)."""
import warnings

import numpy as np  # shape arithmetic only

from ...autograd.function import Function
from ...errors import ArgumentError, DTypeError, ShapeError
from .._args import quiet
from .._rules import composite_jvp
from ._util import (check_dtype_like, check_reduction, check_tensors, grad_scale, reduce_in_ops, reduce_loss, save,
                    saved, weighted_reduce)
from .activation import stable_sigmoid


class MseLoss(Function):
    name = "mse_loss"

    @staticmethod
    def forward(ctx, a, b, *, reduction):
        d = a - b
        out, ctx.factor = reduce_loss(ctx.xp, d * d, reduction)
        ctx.reduction = reduction
        ctx.save_for_backward(d)
        return out

    @staticmethod
    def backward(ctx, grad):
        d, = ctx.saved_tensors
        g = d * (2.0 * grad_scale(grad, ctx.reduction, ctx.factor))
        return g, (-g if ctx.needs_input_grad[1] else None)

    @staticmethod
    def vjp(ctx, grad):
        d, = ctx.node.saved_tensors   # a - b, connected to both inputs (their values are not saved)
        a, b = ctx.input_as(0, d), ctx.input_as(1, ctx.xp.zeros_like(d))
        return ctx.partials(lambda a, b: reduce_in_ops((a - b) * (a - b), ctx.reduction, ctx.factor), (a, b), grad,
                        ctx.needs_input_grad)

    @staticmethod
    def jvp(primals, tangents, out, reduction):
        factor = None if reduction != "mean" else 1.0 / max(primals[0].numel(), primals[1].numel())
        return composite_jvp(lambda a, b: reduce_in_ops((a - b) * (a - b), reduction, factor), primals, tangents)


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
        out, ctx.factor = reduce_loss(xp, loss, reduction)
        ctx.reduction, ctx.beta, ctx.scale = reduction, beta, scale
        ctx.save_for_backward(d, small)
        return out

    @staticmethod
    def backward(ctx, grad):
        xp = ctx.xp
        d, small = ctx.saved_tensors
        slope = xp.where(small, d * (1.0 / ctx.beta if ctx.beta else 0.0), xp.sign(d))
        g = slope * (ctx.scale * grad_scale(grad, ctx.reduction, ctx.factor))
        return g, (-g if ctx.needs_input_grad[1] else None)

    @staticmethod
    def vjp(ctx, grad):
        d, small = ctx.node.saved_tensors   # d = a - b, connected to both inputs (their values are not saved)
        a, b = ctx.input_as(0, d), ctx.input_as(1, ctx.xp.zeros_like(d))
        fn = lambda a, b: _smooth_l1_in_ops(a - b, small, ctx.beta, ctx.scale, ctx.reduction, ctx.factor)  # noqa
        return ctx.partials(fn, (a, b), grad, ctx.needs_input_grad)

    @staticmethod
    def jvp(primals, tangents, out, reduction, beta, scale):
        (a, b), xp = primals, primals[0].device.xp
        small = xp.abs(a.array - b.array) < beta
        factor = None if reduction != "mean" else 1.0 / small.size
        return composite_jvp(lambda a, b: _smooth_l1_in_ops(a - b, small, beta, scale, reduction, factor), primals,
                             tangents)


def _smooth_l1_in_ops(d, small, beta, scale, reduction, factor):
    """smooth_l1 of ``d`` in minigrad ops, the quadratic part where ``small`` (an array) holds."""
    from ..elementwise import where
    from .._rules import const
    quadratic = d * d * (0.5 / beta if beta else 0.0)
    return reduce_in_ops(where(const(d, small), quadratic, d.abs() - 0.5 * beta) * scale, reduction, factor)


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
        return weighted_reduce(ctx, xp, raw, weight, reduction)

    @staticmethod
    def backward(ctx, grad):
        xp = ctx.xp
        x, t, weight, log_x, log_1mx, raw = saved(ctx)
        need_x, need_t, need_w = ctx.needs_input_grad
        s = grad_scale(grad, ctx.reduction, ctx.factor)
        sw = s if weight is None else s * weight
        dx = (x - t) / xp.maximum(x * (1.0 - x), 1e-12) * sw if need_x else None
        dt = (log_1mx - log_x) * sw if need_t else None
        dw = xp.broadcast_to(raw * s, ctx.loss_shape) if need_w else None
        return dx, dt, dw

    @staticmethod
    def vjp(ctx, grad):
        x, t, weight = saved(ctx)[:3]
        return ctx.partials(lambda *a: _bce_probs_in_ops(*a, ctx.reduction, ctx.factor), (x, t, weight), grad,
                        ctx.needs_input_grad)

    @staticmethod
    def jvp(primals, tangents, out, reduction):
        factor = None if reduction != "mean" else 1.0 / max(primals[0].numel(), 1)
        return composite_jvp(lambda *a: _bce_probs_in_ops(*a, reduction, factor), primals, tangents)


def _bce_probs_in_ops(x, t, weight, reduction, factor):
    """binary_cross_entropy in minigrad ops (each log clamped at -100, as forward)."""
    raw = -(t * x.log().clamp(min=-100.0) + (1.0 - t) * (1.0 - x).log().clamp(min=-100.0))
    return reduce_in_ops(raw if weight is None else raw * weight, reduction, factor)


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
        return weighted_reduce(ctx, xp, raw, weight, reduction)

    @staticmethod
    def backward(ctx, grad):
        xp = ctx.xp
        x, t, weight, pos_weight, sp, raw = saved(ctx)
        need_x, need_t, need_w, need_pw = ctx.needs_input_grad
        s = grad_scale(grad, ctx.reduction, ctx.factor)
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

    @staticmethod
    def vjp(ctx, grad):
        x, t, weight, pos_weight, _, _ = saved(ctx)
        return ctx.partials(lambda *a: _bce(*a, ctx.reduction, ctx.factor), (x, t, weight, pos_weight), grad,
                        ctx.needs_input_grad)

    @staticmethod
    def jvp(primals, tangents, out, reduction):
        x, t, w, pw = primals
        shape = np.broadcast_shapes(*(tuple(a.shape) for a in primals if a is not None))
        factor = None if reduction != "mean" else 1.0 / max(int(np.prod(shape)), 1)
        return composite_jvp(lambda *a: _bce(*a, reduction, factor), primals, tangents)


def _bce(x, t, weight, pos_weight, reduction, factor):
    """binary_cross_entropy_with_logits in minigrad ops (softplus(-x) in its stable form)."""
    sp = ((-x.abs()).exp() + 1.0).log() + (-x).clamp(min=0.0)
    lw = None if pos_weight is None else (pos_weight - 1.0) * t + 1.0
    raw = (1.0 - t) * x + (sp if lw is None else lw * sp)
    return reduce_in_ops(raw if weight is None else raw * weight, reduction, factor)


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
