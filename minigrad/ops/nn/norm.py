"""layer_norm and batch_norm: normalise with the biased variance, scale, shift; fused backward.

For x_hat = (x - mean) * rstd over M elements, the gradient of the normalisation is
    dx = rstd * (dx_hat - mean(dx_hat) - x_hat * mean(dx_hat * x_hat))
with dx_hat = g * weight. layer_norm reduces over the trailing ``normalized_shape`` dims, batch_norm
(training) over every dim except the channel dim 1. In eval mode batch_norm uses the running statistics,
which are constants: dx = g * weight * rstd.
"""
from ...autograd.extensions import outside_apply
from ...autograd.function import Function
from ...errors import ArgumentError, ShapeError
from ..inplace import bump
from .._rules import composite_jvp
from ._util import channel_sum, check_dtype_like, save, saved


def _norm_backward(g_hat, x_hat, rstd, mean):
    """dx for x_hat = (x - mean(x)) * rstd, both statistics taken by ``mean`` (keeping dims): rstd * (g_hat -
    mean(g_hat) - x_hat * mean(g_hat * x_hat)), in one activation-sized buffer (in place after the first)."""
    t = g_hat * x_hat
    m2 = mean(t)
    t[...] = x_hat
    t *= m2
    t -= g_hat
    t += mean(g_hat)
    t *= -rstd
    return t


class LayerNorm(Function):
    name = "layer_norm"

    @staticmethod
    def forward(ctx, x, weight, bias, *, normalized_shape, eps):
        check_dtype_like("layer_norm", "weight", weight, x)
        check_dtype_like("layer_norm", "bias", bias, x)
        xp = ctx.xp
        dims = tuple(range(x.ndim - len(normalized_shape), x.ndim))
        mean = x.mean(axis=dims, keepdims=True)
        xc = x - mean
        var = (xc * xc).mean(axis=dims, keepdims=True)
        rstd = 1.0 / xp.sqrt(var + eps)
        x_hat = xc * rstd
        ctx.dims, ctx.eps = dims, eps
        save(ctx, x_hat, rstd, weight, x)   # x: for the second derivative (vjp)
        out = x_hat * weight if weight is not None else x_hat.copy()
        if bias is not None:
            out += bias
        return out

    @staticmethod
    def backward(ctx, grad):
        x_hat, rstd, weight, _ = saved(ctx)
        dims = ctx.dims
        need_x, need_w, need_b = ctx.needs_input_grad
        lead = tuple(range(grad.ndim - len(dims)))
        dx = dw = db = None
        if need_x:
            g_hat = grad * weight if weight is not None else grad
            dx = _norm_backward(g_hat, x_hat, rstd, lambda a: a.mean(axis=dims, keepdims=True))
        if need_w:
            dw = (grad * x_hat).sum(axis=lead)
        if need_b:
            db = grad.sum(axis=lead)
        return dx, dw, db

    @staticmethod
    def vjp(ctx, grad):
        _, _, weight, x = saved(ctx)
        need_x, need_w, need_b = ctx.needs_input_grad
        dx, dw = ctx.partials(lambda x, w: _normalise(x, w, None, ctx.dims, ctx.eps), (x, weight), grad,
                          (need_x, need_w))
        return dx, dw, grad.sum(dim=tuple(range(grad.ndim - len(ctx.dims)))) if need_b else None

    @staticmethod
    def jvp(primals, tangents, out, normalized_shape, eps):
        dims = tuple(range(primals[0].ndim - len(normalized_shape), primals[0].ndim))
        return composite_jvp(lambda x, w, b: _normalise(x, w, b, dims, eps), primals, tangents)


def _normalise(x, weight, bias, dims, eps, stats=None):
    """(x - mean) / sqrt(var + eps) * weight + bias in minigrad ops (differentiable again): the
    normalisation of both norms for higher order and forward mode. ``stats``: fixed (mean, rstd)."""
    if stats is None:
        xc = x - x.mean(dim=dims, keepdim=True)
        y = xc * ((xc * xc).mean(dim=dims, keepdim=True) + eps).rsqrt()
    else:
        y = (x - stats[0]) * stats[1]
    if weight is not None:
        y = y * weight
    return y if bias is None else y + bias


def _check_layer_norm(x, ns, weight, bias):
    k = len(ns)
    if k == 0 or x.ndim < k or tuple(x.shape[x.ndim - k:]) != ns:
        raise ShapeError(f"layer_norm: normalized_shape {ns} does not match the trailing dims of input "
                         f"shape {tuple(x.shape)} (expected input of shape (*, {', '.join(map(str, ns))}))")
    for label, p in (("weight", weight), ("bias", bias)):
        if p is not None and tuple(p.shape) != ns:
            raise ShapeError(f"layer_norm: {label} shape {tuple(p.shape)} must equal normalized_shape {ns}")


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalise over the trailing ``normalized_shape`` dims (biased variance), then * weight + bias."""
    ns = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    _check_layer_norm(input, ns, weight, bias)
    return LayerNorm.apply(input, weight, bias, normalized_shape=ns, eps=float(eps))


class BatchNorm(Function):
    name = "batch_norm"

    @staticmethod
    def forward(ctx, x, running_mean, running_var, weight, bias, *, training, momentum, eps):
        xp = ctx.xp
        C = x.shape[1]
        bshape = (1, C) + (1,) * (x.ndim - 2)
        ctx.training, ctx.eps = training, eps
        if training:
            m = x.size // C
            mean = channel_sum(xp, x).reshape(bshape) / m
            xc = x - mean
            out = xc * xc                     # the squares' buffer becomes the output's (no third array)
            var = channel_sum(xp, out).reshape(bshape) / m       # biased: used to normalise
            if running_mean is not None:                             # in place, as PyTorch's buffers
                running_mean *= 1.0 - momentum
                running_mean += momentum * mean.reshape(C).astype(running_mean.dtype)
            if running_var is not None:                              # unbiased: tracked for eval
                running_var *= 1.0 - momentum
                running_var += (momentum * m / (m - 1)) * var.reshape(C).astype(running_var.dtype)
        else:
            xc = x - running_mean.reshape(bshape).astype(x.dtype, copy=False)
            var = running_var.reshape(bshape).astype(x.dtype, copy=False)
            out = None
        rstd = 1.0 / xp.sqrt(var + eps)
        x_hat = xc * rstd if xp.result_type(xc, rstd) != xc.dtype else xp.multiply(xc, rstd, out=xc)
        w = None if weight is None else weight.reshape(bshape)
        save(ctx, x_hat, rstd, weight, x)   # x: for the second derivative (vjp)
        same = out is not None and xp.result_type(x_hat, x_hat if w is None else w) == out.dtype
        out = (xp.multiply(x_hat, w, out=out) if w is not None else xp.copyto(out, x_hat) or out) if same else \
            (x_hat * w if w is not None else x_hat.copy())
        if bias is not None:
            out += bias.reshape(bshape)
        return out

    @staticmethod
    def backward(ctx, grad):
        x_hat, rstd, weight, _ = saved(ctx)
        need_x, _, _, need_w, need_b = ctx.needs_input_grad
        xp = ctx.xp
        C = grad.shape[1]
        bshape = (1, C) + (1,) * (grad.ndim - 2)
        m = grad.size // C
        dx = dw = db = None
        if need_w:                          # first: its temporary is gone before dx's two arrays exist
            dw = channel_sum(xp, grad * x_hat)
        if need_x:
            g_hat = grad * weight.reshape(bshape) if weight is not None else grad
            mean = lambda a: channel_sum(xp, a).reshape(bshape) / m  # noqa: E731
            dx = _norm_backward(g_hat, x_hat, rstd, mean) if ctx.training else g_hat * rstd
        if need_b:
            db = channel_sum(xp, grad)
        return dx, None, None, dw, db

    @staticmethod
    def vjp(ctx, grad):
        x_hat, rstd, weight, x = saved(ctx)
        need_x, _, _, need_w, need_b = ctx.needs_input_grad
        # eval mode: x_hat = (x - running_mean) * rstd is linear in x; written around the saved values
        stats = None if ctx.training else (x.detach() - x_hat.detach() / rstd.detach(), rstd.detach())
        dx, dw = ctx.partials(lambda x, w: _batch_normalise(x, w, None, ctx.eps, stats), (x, weight), grad,
                          (need_x, need_w))
        return dx, None, None, dw, grad.sum(dim=(0,) + tuple(range(2, grad.ndim))) if need_b else None

    @staticmethod
    def jvp(primals, tangents, out, training, momentum, eps):
        x, running_mean, running_var = primals[:3]
        stats = None
        if not training:   # the running statistics are constants here (forward already used them)
            shape = (1, -1) + (1,) * (x.ndim - 2)
            stats = (running_mean.detach().reshape(shape), (running_var.detach().reshape(shape) + eps).rsqrt())
        return composite_jvp(lambda x, w, b: _batch_normalise(x, w, b, eps, stats),
                             (x,) + tuple(primals[3:]), (tangents[0],) + tuple(tangents[3:]))


def _batch_normalise(x, weight, bias, eps, stats):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return _normalise(x, None if weight is None else weight.reshape(shape),
                      None if bias is None else bias.reshape(shape), (0,) + tuple(range(2, x.ndim)), eps, stats)


def _check_batch_norm(x, running_mean, running_var, weight, bias, training, momentum):
    if momentum is None or isinstance(momentum, bool) or not isinstance(momentum, (int, float)):
        raise ArgumentError(f"batch_norm: momentum must be a float, got {momentum!r}")
    if x.ndim < 2:
        raise ShapeError(f"batch_norm: expected an input of shape (N, C) or (N, C, *), got shape "
                         f"{tuple(x.shape)}")
    C = x.shape[1]
    for label, p in (("running_mean", running_mean), ("running_var", running_var),
                     ("weight", weight), ("bias", bias)):
        if p is not None and tuple(p.shape) != (C,):
            raise ShapeError(f"batch_norm: {label} shape {tuple(p.shape)} does not match the {C} "
                             f"channels of input shape {tuple(x.shape)}")
    if not training and (running_mean is None or running_var is None):
        raise ArgumentError("batch_norm: running_mean and running_var must be given in eval mode "
                            "(training=False)")
    if training and x.numel() <= C:  # (N * spatial) values per channel
        raise ShapeError(f"batch_norm: expected more than 1 value per channel when training, got "
                         f"input shape {tuple(x.shape)}")


@outside_apply   # the running statistics' version bump happens after the op
def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1,
               eps=1e-5):
    """Per-channel normalisation of (N, C) or (N, C, *) inputs.

    training=True: batch statistics (biased variance) normalise, and running_mean/running_var (if given)
    are updated in place: r = (1 - momentum) r + momentum * batch_stat, with the unbiased variance.
    training=False: the running statistics normalise.
    """
    _check_batch_norm(input, running_mean, running_var, weight, bias, training, momentum)
    out = BatchNorm.apply(input, running_mean, running_var, weight, bias, training=bool(training),
                          momentum=float(momentum), eps=float(eps))
    if training:  # the buffers changed in place
        for buf in (running_mean, running_var):
            if buf is not None:
                bump(buf)
    return out
