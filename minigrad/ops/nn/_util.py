"""Helpers shared by the nn ops: argument checks, sliding windows, a vectorised erf, per-channel sums."""
import math

from ...backend.layout import is_channels_last
from ...errors import ArgumentError, ArgumentTypeError, DTypeError
from ...tensor_base import TensorBase as Tensor  # every Tensor is one (tensor.py imports ops)

REDUCTIONS = ("mean", "sum", "none")


def check_reduction(op, reduction):
    if reduction not in REDUCTIONS:
        raise ArgumentError(f"{op}: unknown reduction {reduction!r} (expected 'mean', 'sum' or 'none')")


def ntuple(op, what, value, n, minimum):
    """``3`` -> ``(3, 3)``; a tuple/list of length n passes; every entry must be an int >= minimum."""
    if isinstance(value, (tuple, list)):
        vals = tuple(value)
        if len(vals) == 1 and n > 1:
            vals = vals * n
    else:
        vals = (value,) * n
    if len(vals) != n or not all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
        raise ArgumentError(f"{op}: {what} must be an int or a tuple of {n} ints, got {value!r}")
    if any(v < minimum for v in vals):
        raise ArgumentError(f"{op}: {what} must be >= {minimum}, got {value!r}")
    return vals


# Dtype agreement is the one check made inside ``forward``, on the arrays, rather than in the public
# function: autocast casts an op's inputs inside ``Function.apply`` (autograd/extensions.py, input_casts),
# so a check before ``apply`` would reject exactly the mixed dtypes autocast exists to reconcile.
def check_tensors(op, **arguments):
    """Each named argument (None allowed) must be a Tensor, as PyTorch's losses require: a NumPy array or
    a list is refused with a message that says how to wrap it."""
    for name, value in arguments.items():
        if value is not None and not isinstance(value, Tensor):
            raise ArgumentTypeError(f"{op}: {name} must be a Tensor, got {type(value).__name__} "
                                    f"(wrap it with mg.tensor(...))")


def check_same_dtype(op, x, weight, bias):
    """linear / conv: input, weight and (optional) bias arrays must share a dtype."""
    if x.dtype != weight.dtype or (bias is not None and bias.dtype != weight.dtype):
        raise DTypeError(f"{op}: input ({x.dtype}), weight ({weight.dtype})"
                         + ("" if bias is None else f" and bias ({bias.dtype})") + " must share a dtype")


def check_dtype_like(op, label, t, x):
    """An optional array argument ``t`` (weight, target...) must have the input ``x``'s dtype."""
    if t is not None and t.dtype != x.dtype:
        raise DTypeError(f"{op}: {label} dtype {t.dtype} differs from input dtype {x.dtype}")


def windows(xp, x, kernel, stride, dilation):
    """A read-only view (N, C, *out, *kernel) of every window of ``x`` (N, C, *spatial); no copy.

    ``out[i] = (size - dilation * (k - 1) - 1) // stride + 1`` per spatial dim; the caller checks that
    every out size is >= 1.
    """
    spatial = x.shape[2:]
    out = tuple((s - d * (k - 1) - 1) // st + 1 for s, k, st, d in zip(spatial, kernel, stride, dilation))
    strides = x.strides[2:]
    shape = x.shape[:2] + out + tuple(kernel)
    view_strides = (x.strides[:2] + tuple(s * st for s, st in zip(strides, stride))
                    + tuple(s * d for s, d in zip(strides, dilation)))
    if xp.__name__ == "numpy":  # read-only: windows overlap, a write would alias
        return xp.lib.stride_tricks.as_strided(x, shape=shape, strides=view_strides, writeable=False)
    return xp.lib.stride_tricks.as_strided(x, shape=shape, strides=view_strides)  # pragma: no cover


def pad_spatial(ctx, x, widths, value=0):
    """Pad the spatial dims of (N, C, *spatial) by ``widths`` ((before, after) per dim) with ``value``,
    keeping x's memory layout (``xp.pad`` would return C order); x itself when there is nothing to pad."""
    if not any(lo or hi for lo, hi in widths):
        return x
    shape = x.shape[:2] + tuple(s + lo + hi for s, (lo, hi) in zip(x.shape[2:], widths))
    out = ctx.empty_like(shape, x.dtype, x)
    out.fill(value)
    out[(slice(None), slice(None)) + tuple(slice(lo, lo + s) for s, (lo, _) in zip(x.shape[2:], widths))] = x
    return out


def kernel_slices(offsets, out, stride, dilation):
    """For one kernel position: the strided slices of the (padded) input that it touched, one per
    output position. Positions inside one kernel offset never collide, so ``dx[slices] += g`` is exact."""
    return tuple(slice(o * d, o * d + st * (n - 1) + 1, st)
                 for o, n, st, d in zip(offsets, out, stride, dilation))


# --- erf ------------------------------------------------------------------------------------------
# W. J. Cody, "Rational Chebyshev approximations for the error function", Math. Comp. 23 (1969),
# as in his CALERF (SPECFUN). Accurate to about 1e-16 in double precision.
_A = (3.16112374387056560e00, 1.13864154151050156e02, 3.77485237685302021e02,
      3.20937758913846947e03, 1.85777706184603153e-1)
_B = (2.36012909523441209e01, 2.44024637934444173e02, 1.28261652607737228e03, 2.84423683343917062e03)
_C = (5.64188496988670089e-1, 8.88314979438837594e00, 6.61191906371416295e01, 2.98635138197400131e02,
      8.81952221241769090e02, 1.71204761263407058e03, 2.05107837782607147e03, 1.23033935479799725e03,
      2.15311535474403846e-8)
_D = (1.57449261107098347e01, 1.17693950891312499e02, 5.37181101862009858e02, 1.62138957456669019e03,
      3.29079923573345963e03, 4.36261909014324716e03, 3.43936767414372164e03, 1.23033935480374942e03)
_P = (3.05326634961232344e-1, 3.60344899949804439e-1, 1.25781726111229246e-1, 1.60837851487422766e-2,
      6.58749161529837803e-4, 1.63153871373020978e-2)
_Q = (2.56852019228982242e00, 1.87295284992346047e00, 5.27905102951428412e-1, 6.05183413124413191e-2,
      2.33520497626869185e-3)
_RSQRTPI = 1.0 / math.sqrt(math.pi)


def erf_rational(xp, x):
    """erf(x) from Cody's three rational approximations, evaluated on every element (float64 inside)."""
    x = xp.asarray(x, dtype="float64")
    y = xp.minimum(xp.abs(x), 6.0)  # erf(6) == 1 in double precision
    z = y * y
    # |x| <= 0.46875: erf directly
    num, den = _A[4] * z, z
    for i in range(3):
        num, den = (num + _A[i]) * z, (den + _B[i]) * z
    small = y * (num + _A[3]) / (den + _B[3])
    # 0.46875 < |x| <= 4: erfc = exp(-y^2) R(y)
    num, den = _C[8] * y, y
    for i in range(7):
        num, den = (num + _C[i]) * y, (den + _D[i]) * y
    mid = (num + _C[7]) / (den + _D[7])
    # |x| > 4: erfc = exp(-y^2) (1/sqrt(pi) - R(1/y^2)/y^2) / y
    r = 1.0 / xp.maximum(z, 16.0)
    num, den = _P[5] * r, r
    for i in range(4):
        num, den = (num + _P[i]) * r, (den + _Q[i]) * r
    big = (_RSQRTPI - r * (num + _P[4]) / (den + _Q[4])) / xp.maximum(y, 4.0)
    # exp(-y^2) split as exp(-ysq^2) exp(-del) for accuracy (Cody's trick)
    ysq = xp.trunc(y * 16.0) / 16.0
    scale = xp.exp(-ysq * ysq) * xp.exp(-(y - ysq) * (y + ysq))
    erfc = scale * xp.where(y <= 4.0, mid, big)
    res = xp.where(y <= 0.46875, small, 1.0 - erfc)
    return xp.copysign(res, x)


def _scipy_erf(xp):
    try:
        if xp.__name__ == "numpy":
            from scipy.special import erf
        else:  # pragma: no cover - GPU only
            from cupyx.scipy.special import erf
        return erf
    except ImportError:  # pragma: no cover - depends on the environment
        return None


_ERF = {}


_AS = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)  # Abramowitz & Stegun 7.1.26


def erf_fast32(xp, x, gauss=False):
    """erf for float32/float16 in the input's precision: Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7 in
    exact arithmetic, < 6e-7 measured in float32, a few ulps), in a dozen in-place passes: 3-5x faster than
    SciPy's erf, which computes in double. ``gauss=True`` also returns exp(-x^2), computed on the way."""
    ax = xp.abs(x)
    t = ax * 0.3275911
    t += 1.0
    xp.reciprocal(t, out=t)
    poly = t * _AS[4]
    for a in _AS[3::-1]:
        poly += a
        poly *= t
    xp.multiply(ax, ax, out=ax)
    xp.negative(ax, out=ax)
    xp.exp(ax, out=ax)                  # exp(-x^2)
    poly *= ax
    xp.subtract(1.0, poly, out=poly)
    out = xp.copysign(poly, x, out=poly)
    return (out, ax) if gauss else out


def erf(xp, x, gauss=False):
    """Elementwise erf keeping x's dtype: a fast float32 form for float32/float16; for float64 SciPy's
    (or cupyx's) when importable, else Cody's rational approximation (both ~1e-16).
    ``gauss=True`` returns (erf(x), exp(-x^2)): the derivative of erf needs the Gaussian, and the float32
    form computes it anyway."""
    if x.dtype.itemsize <= 4:
        return erf_fast32(xp, x, gauss)
    fn = _ERF.get(xp.__name__, False)
    if fn is False:
        fn = _ERF[xp.__name__] = _scipy_erf(xp)
    if fn is not None:
        out = fn(x)
        out = out if out.dtype == x.dtype else out.astype(x.dtype)
    else:
        out = erf_rational(xp, x).astype(x.dtype, copy=False)
    return (out, xp.exp(-(x * x))) if gauss else out


# --- per-channel sums -----------------------------------------------------------------------------
def channel_sum(xp, a):
    """Sum of an (N, C, *spatial) array over every dim but the channels (bias and norm gradients).
    Channels-last memory (a conv's output) is an (M, C) matrix, and there a GEMV with a ones vector is
    ~3x faster than NumPy's reduction over the outer axis."""
    if is_channels_last(a):
        flat = xp.moveaxis(a, 1, -1).reshape(-1, a.shape[1])
        return xp.ones(flat.shape[0], a.dtype) @ flat
    return a.sum(axis=(0,) + tuple(range(2, a.ndim)))


# --- saving optional arrays -----------------------------------------------------------------------
def save(ctx, *arrays):
    """save_for_backward for arrays that may be None (optional weight/bias): only real arrays are saved,
    so saved-tensor hooks never see None."""
    ctx.present = tuple(a is not None for a in arrays)
    ctx.save_for_backward(*(a for a in arrays if a is not None))


def saved(ctx):
    """The arrays given to ``save``, with None back in place."""
    it = iter(ctx.saved_tensors)
    return tuple(next(it) if p else None for p in ctx.present)


# --- reductions of losses (loss.py, pointwise_loss.py) -----------------------------------------------
def reduce_loss(xp, loss, reduction, denom=None):
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


def weighted_reduce(ctx, xp, raw, weight, reduction):
    """The elementwise loss times ``weight`` (if any), reduced; records what backward needs to scale by."""
    loss = raw if weight is None else raw * weight
    out, ctx.factor = reduce_loss(xp, loss, reduction)
    ctx.reduction, ctx.loss_shape = reduction, loss.shape
    return out


def grad_scale(grad, reduction, factor):
    """The per-element factor of d(result)/d(loss_i): grad itself for 'none', grad * factor otherwise."""
    return grad if reduction == "none" else (grad * factor).astype(grad.dtype, copy=False)


def reduce_in_ops(loss, reduction, factor):
    """``reduce_loss`` in minigrad ops (the scale ``factor`` as forward computed it)."""
    return loss if reduction == "none" else loss.sum() if reduction == "sum" else loss.sum() * factor
