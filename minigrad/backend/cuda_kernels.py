"""Fused CuPy kernels for the GPU hot paths (imported only by the CuPy backend, never on CPU).

One kernel launch instead of a chain of elementwise ops: each intermediate of e.g. Adam's update would
otherwise be a full-size temporary in GPU memory and a separate launch. The maths is exactly that of the
NumPy code paths (tests on a GPU compare both).

Every CUDA kernel minigrad writes is built here, through one of two small factories, and listed in
``KERNELS`` (name -> ``KernelSpec``), so the NVRTC check (``make test-cuda``: tests/cuda/) can compile each
one, for sm_80 and sm_90, exactly as CuPy hands it to NVRTC -- on every CI run, without a GPU:

    _scale = elementwise("T x, T a", "T y", "y = a * x", "minigrad_scale",
                         types=FLOATS, scalars="a")            # a cupy.ElementwiseKernel
    _paged = raw(CODE, "minigrad_paged_attention")            # a cupy.RawKernel (its source is compiled as is)

* ``name``: unique, ``minigrad_`` first (a duplicate is refused);
* ``types``: every binding of the type placeholders (``T``, ``S``...) minigrad calls the kernel with, as
  dicts of dtype names: CuPy compiles one program per binding, and so does the check. A kernel the wrappers
  only call in float32/float64 says ``FLOATS``; list float16 too if a float16 array can reach it;
* ``scalars``: the parameters minigrad passes a Python/NumPy number for (the others get arrays): CuPy
  declares the two differently (``const float lr`` vs ``CArray<float, 1, 1, 1> _raw_x``).
A kernel built anywhere else (``cupy.ElementwiseKernel`` in another module) fails
tests/backend/test_kernel_catalogue.py; the fusion pass's generated kernels are the one other source, and the
check enumerates them itself (every fusible op x dtype). On a GPU, ``make gpu-check`` runs every kernel
against NumPy through a case of ``catalogue_cases`` in benchmarks/gpu_kernel_check.py (add one for a new
kernel) and checks that CuPy compiled the declared bindings and the check's sources.
"""
import functools
from typing import NamedTuple

import cupy  # pragma: no cover - GPU only

FLOATS = ({"T": "float32"}, {"T": "float64"})   # the wrappers run float16 through float32 (_half_in_float32)


class KernelSpec(NamedTuple):
    """How a catalogued kernel was built and how minigrad calls it (read by the NVRTC check)."""
    kind: str           # 'elementwise' or 'raw'
    kernel: object      # the cupy.ElementwiseKernel / cupy.RawKernel
    args: tuple         # elementwise: (in_params, out_params, operation); raw: (code,)
    types: tuple        # elementwise: the placeholder bindings it is called with ({'T': 'float32'}, ...)
    scalars: frozenset  # elementwise: the parameters given numbers, not arrays
    options: dict       # the rest of the constructor's keywords (preamble, options=...)


KERNELS = {}


def _register(name, spec):
    if name in KERNELS:
        raise ValueError(f"cuda_kernels: a kernel named {name!r} already exists")
    KERNELS[name] = spec
    return spec.kernel


def elementwise(in_params, out_params, operation, name, *, types, scalars="", **options):
    """A ``cupy.ElementwiseKernel(in_params, out_params, operation, name, **options)``, catalogued."""
    kernel = cupy.ElementwiseKernel(in_params, out_params, operation, name, **options)
    names = frozenset(s.strip() for s in scalars.split(",") if s.strip())
    return _register(name, KernelSpec("elementwise", kernel, (in_params, out_params, operation),
                                      tuple(types), names, options))


def raw(code, name, **options):
    """A ``cupy.RawKernel(code, name, **options)``, catalogued (NVRTC compiles ``code`` as it is)."""
    return _register(name, KernelSpec("raw", cupy.RawKernel(code, name, **options), (code,), (), frozenset(),
                                      options))


def _half_in_float32(fn):
    """float16 arrays are computed in float32 and the result cast back (as autocast does): CUDA's half type
    has no erf/tanh/exp overloads on every toolkit, and float32 maths is as fast on these memory-bound
    kernels."""
    @functools.wraps(fn)
    def wrapper(x, *args):
        if x.dtype != cupy.float16:
            return fn(x, *args)
        args = tuple(a.astype(cupy.float32) if isinstance(a, cupy.ndarray) and a.dtype == cupy.float16 else a
                     for a in args)
        return fn(x.astype(cupy.float32), *args).astype(cupy.float16)
    return wrapper


# --- GELU -----------------------------------------------------------------------------------------
_gelu_fwd = elementwise(
    "T x, int32 tanh_approx", "T y",
    """
    if (tanh_approx) {
        T u = (T)0.7978845608028654 * (x + (T)0.044715 * x * x * x);
        y = (T)0.5 * x * ((T)1 + tanh(u));
    } else {
        y = (T)0.5 * x * ((T)1 + erf(x * (T)0.7071067811865476));
    }
    """, "minigrad_gelu_fwd", types=FLOATS, scalars="tanh_approx")

_gelu_bwd = elementwise(
    "T x, T g, int32 tanh_approx", "T dx",
    """
    if (tanh_approx) {
        T u = (T)0.7978845608028654 * (x + (T)0.044715 * x * x * x);
        T t = tanh(u);
        T du = (T)0.7978845608028654 * ((T)1 + (T)0.134145 * x * x);
        dx = g * ((T)0.5 * ((T)1 + t) + (T)0.5 * x * ((T)1 - t * t) * du);
    } else {
        T cdf = (T)0.5 * ((T)1 + erf(x * (T)0.7071067811865476));
        T pdf = exp((T)-0.5 * x * x) * (T)0.3989422804014327;
        dx = g * (cdf + x * pdf);
    }
    """, "minigrad_gelu_bwd", types=FLOATS, scalars="tanh_approx")


@_half_in_float32
def gelu(x, approximate="none"):
    return _gelu_fwd(x, 1 if approximate == "tanh" else 0)


@_half_in_float32
def gelu_backward(x, grad, approximate="none"):
    return _gelu_bwd(x, grad, 1 if approximate == "tanh" else 0)


# --- softmax / log-softmax / cross-entropy ---------------------------------------------------------
_exp_shift = elementwise("T x, T m", "T y", "y = exp(x - m)", "minigrad_exp_shift", types=FLOATS)
_div = elementwise("T e, T s", "T y", "y = e / s", "minigrad_div", types=FLOATS)
_log_softmax_out = elementwise("T x, T m, T s", "T y", "y = x - m - log(s)",
                                          "minigrad_log_softmax", types=FLOATS)
_softmax_bwd = elementwise("T y, T g, T dot", "T dx", "dx = y * (g - dot)", "minigrad_softmax_bwd",
                           types=FLOATS)
_log_softmax_bwd = elementwise("T y, T g, T gsum", "T dx", "dx = g - exp(y) * gsum",
                                          "minigrad_log_softmax_bwd", types=FLOATS)


@_half_in_float32
def softmax(x, axis):
    m = x.max(axis=axis, keepdims=True)
    e = _exp_shift(x, m)
    return _div(e, e.sum(axis=axis, keepdims=True))


@_half_in_float32
def log_softmax(x, axis):
    m = x.max(axis=axis, keepdims=True)
    s = _exp_shift(x, m).sum(axis=axis, keepdims=True)
    return _log_softmax_out(x, m, s)


@_half_in_float32
def softmax_backward(y, grad, axis):
    return _softmax_bwd(y, grad, (y * grad).sum(axis=axis, keepdims=True))


@_half_in_float32
def log_softmax_backward(y, grad, axis):
    return _log_softmax_bwd(y, grad, grad.sum(axis=axis, keepdims=True))


_ce_grad = elementwise(
    "T logp, raw int64 target, raw T row_scale, int32 n_classes, T smooth", "T dx",
    """
    int row = i / n_classes;
    int col = i % n_classes;
    long long t = target[row];
    T s = row_scale[row];
    T onehot = (col == t) ? (T)1 : (T)0;
    T q = ((T)1 - smooth) * onehot + smooth / (T)n_classes;
    dx = (t < 0) ? (T)0 : s * (exp(logp) - q);
    """, "minigrad_ce_grad", types=FLOATS, scalars="n_classes, smooth")


@_half_in_float32
def cross_entropy_grad(log_probs, target, row_scale, label_smoothing=0.0):
    """d loss / d logits for 2-D (N, C) log-probabilities: row_scale * (softmax - smoothed one-hot).

    ``target`` rows < 0 are ignored rows (gradient 0); ``row_scale`` folds in class weights, the
    reduction's 1/N and the incoming gradient.
    """
    n, c = log_probs.shape
    return _ce_grad(log_probs, target, row_scale.astype(log_probs.dtype, copy=False), c,
                    log_probs.dtype.type(label_smoothing))


# --- optimizer updates (in place) ------------------------------------------------------------------
_sgd = elementwise(
    "T g, T lr, T momentum, T dampening, T wd, int32 nesterov, int32 first", "T p, T buf",
    """
    T d = g + wd * p;
    if (momentum != (T)0) {
        buf = first ? d : momentum * buf + ((T)1 - dampening) * d;
        d = nesterov ? d + momentum * buf : buf;
    }
    p = p - lr * d;
    """, "minigrad_sgd", types=FLOATS, scalars="lr, momentum, dampening, wd, nesterov, first")

_adam = elementwise(
    "T g, T lr, T beta1, T beta2, T eps, T wd, T bc1, T bc2, int32 decoupled", "T p, T m, T v",
    """
    T d = g;
    if (decoupled) { p = p * ((T)1 - lr * wd); } else { d = g + wd * p; }
    m = beta1 * m + ((T)1 - beta1) * d;
    v = beta2 * v + ((T)1 - beta2) * d * d;
    T denom = sqrt(v / bc2) + eps;
    p = p - (lr / bc1) * m / denom;
    """, "minigrad_adam", types=FLOATS, scalars="lr, beta1, beta2, eps, wd, bc1, bc2, decoupled")


_sgd_plain = elementwise("T g, T lr, T wd", "T p", "p = p - lr * (g + wd * p)", "minigrad_sgd_plain",
                         types=FLOATS, scalars="lr, wd")


def sgd_(param, grad, buf, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
    """SGD step in place on ``param`` (and the momentum ``buf``, created on the first step); PyTorch's
    formula. Returns the momentum buffer (None without momentum)."""
    t = param.dtype.type
    if momentum == 0:
        _sgd_plain(grad, t(lr), t(weight_decay), param)
        return None
    first = buf is None
    if first:
        buf = cupy.empty_like(param)
    _sgd(grad, t(lr), t(momentum), t(dampening), t(weight_decay), int(nesterov), int(first), param, buf)
    return buf


def adam_(param, grad, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay, step, decoupled):
    """Adam (decoupled=False, L2 weight decay) / AdamW (decoupled=True) step in place."""
    t = param.dtype.type
    _adam(grad, t(lr), t(beta1), t(beta2), t(eps), t(weight_decay), t(1 - beta1 ** step),
          t(1 - beta2 ** step), int(decoupled), param, exp_avg, exp_avg_sq)


# --- automatic mixed precision (minigrad.amp) ------------------------------------------------------
_amp_unscale = elementwise(
    "T inv_scale", "T g, raw int32 found_inf",
    """
    T v = g * inv_scale;
    if (!isfinite(v)) found_inf[0] = 1;
    g = v;
    """, "minigrad_amp_unscale", types=FLOATS, scalars="inv_scale")

# model parameters of any float dtype <-> their float32 masters (minigrad.amp.master_weights)
_amp_cast_copy = elementwise("S src", "T dst", "dst = (T)src", "minigrad_amp_cast_copy",
                             types=[{"S": s, "T": t} for s, t in (("float32", "float16"), ("float16", "float32"),
                                    ("float32", "float32"), ("float32", "float64"), ("float64", "float32"))])


def amp_unscale_(grads, inv_scale, found_inf):
    """GradScaler's unscale and inf/NaN check in one read and write of each gradient: ``g *= inv_scale`` in
    place, and ``found_inf`` (an int32 device array of one element) set to 1 if any result is inf or NaN.
    The flag stays on the device: the caller reads it once per device, after all gradients."""
    for g in grads:
        _amp_unscale(g.dtype.type(inv_scale), g, found_inf)
    return found_inf


def amp_cast_copy_(dst, src):
    """``dst[...] = src`` converted to dst's dtype in one kernel, into dst's existing storage (master
    weights: float32 masters rounded into the float16 model, float16 gradients widened into the masters'
    gradient buffers) -- no temporary array as ``astype`` then copy would make."""
    _amp_cast_copy(src, dst)
    return dst
