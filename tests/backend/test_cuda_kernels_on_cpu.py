"""The fused CuPy kernels of minigrad/backend/cuda_kernels.py, run on CPU: the same kernel source, compiled
with g++ by the fake ``cupy`` in cupy_on_cpu.py (CuPy's ElementwiseKernel semantics on CPU: this checks the
kernel maths and the Python wrappers' argument order, not CUDA itself).

* each wrapper against minigrad's NumPy code paths or a written-out NumPy formula, float32 and float64;
* the wiring: with the fake-compiled module as the emulated 'cuda' backend's ``fused`` (needs
  MINIGRAD_EMULATE_CUDA=1, as ``make test`` sets), the ops and optimizers take the fused path and agree
  with 'cpu'.
"""
import collections
import importlib
import pathlib
import shutil
import sys

import numpy as np
import pytest

import cupy_on_cpu  # tests/backend/cupy_on_cpu.py (pytest puts this directory on sys.path)
import minigrad as mg
import minigrad.nn.functional as F
from minigrad import nn, optim
from minigrad.backend import cuda as backend_cuda
from minigrad.optim.adam import adam_update
from minigrad.optim.sgd import sgd_update

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to compile the kernels on CPU")

KERNELS = "minigrad.backend.cuda_kernels"
FLOATS = [np.float32, np.float64]
TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-12, atol=1e-13)}
RNG = np.random.default_rng(0)


@pytest.fixture(scope="module")
def ck(tmp_path_factory):
    """minigrad.backend.cuda_kernels imported with the fake cupy. Afterwards sys.modules and the
    minigrad.backend package are as before (a real CuPy and its kernels module, if any, come back)."""
    backend_cuda.probe()  # cache the real answer before `import cupy` could find the fake
    if cupy_on_cpu.cache_dir is None:
        cupy_on_cpu.cache_dir = str(tmp_path_factory.mktemp("cupy_on_cpu"))
    saved = {name: sys.modules.get(name) for name in ("cupy", KERNELS)}
    saved_attr = vars(mg.backend).get("cuda_kernels")
    sys.modules["cupy"] = cupy_on_cpu
    sys.modules.pop(KERNELS, None)
    try:
        yield importlib.import_module(KERNELS)
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
        if saved_attr is None:
            vars(mg.backend).pop("cuda_kernels", None)
        else:
            mg.backend.cuda_kernels = saved_attr


def randn(*shape, dtype=np.float64, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(dtype)


# --- the kernels against NumPy --------------------------------------------------------------------
@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_gelu_forward_backward_match_minigrad_cpu(ck, dtype, approximate):
    x = randn(4, 33, dtype=dtype, scale=3.0)
    x[0, :7] = [-10, -5, -1e-3, 0, 1e-3, 5, 10]
    g = randn(4, 33, dtype=dtype)
    xt = mg.tensor(x, requires_grad=True)
    y = F.gelu(xt, approximate=approximate)
    y.backward(mg.tensor(g))
    out, dx = ck.gelu(x, approximate), ck.gelu_backward(x, g, approximate)
    assert out.dtype == dtype and dx.dtype == dtype and out.shape == dx.shape == x.shape
    np.testing.assert_allclose(out, y.detach().numpy(), **TOL[dtype])
    np.testing.assert_allclose(dx, xt.grad.numpy(), **TOL[dtype])
    if approximate == "none":  # the two formulas really differ: the flag reaches the kernel
        assert np.abs(out - ck.gelu(x, "tanh")).max() > 1e-5


def softmax_ref(x, g, axis):
    """float64 softmax, log_softmax and their backward passes for upstream gradient g."""
    x, g = x.astype(np.float64), g.astype(np.float64)
    shifted = x - x.max(axis=axis, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))
    p = np.exp(logp)
    return p, logp, p * (g - (g * p).sum(axis=axis, keepdims=True)), g - p * g.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("contiguous", [True, False])
@pytest.mark.parametrize("axis", [0, 1, 2, -1])
@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax_log_softmax_and_backward(ck, dtype, axis, contiguous):
    x = randn(3, 4, 5, dtype=dtype, scale=4.0)
    x[0, 0, 0] = 100.0  # exp(100) overflows float32: only the max-shifted form stays finite
    if not contiguous:
        x = np.ascontiguousarray(x.transpose(2, 0, 1)).transpose(1, 2, 0)  # same shape, other strides
    g = randn(3, 4, 5, dtype=dtype)
    p, logp, dp, dlogp = softmax_ref(x, g, axis)
    tol = TOL[dtype] if dtype == np.float64 else dict(rtol=1e-5, atol=1e-6)
    y, ly = ck.softmax(x, axis), ck.log_softmax(x, axis)
    assert y.dtype == ly.dtype == dtype and y.shape == ly.shape == x.shape
    np.testing.assert_allclose(y, p, **tol)
    np.testing.assert_allclose(ly, logp, **tol)
    np.testing.assert_allclose(ck.softmax_backward(y, g, axis), dp, **tol)
    np.testing.assert_allclose(ck.log_softmax_backward(ly, g, axis), dlogp, **tol)


@pytest.mark.parametrize("smoothing", [0.0, 0.2])
@pytest.mark.parametrize("dtype", FLOATS)
def test_cross_entropy_grad_matches_formula(ck, dtype, smoothing):
    n, c = 7, 5
    logits = randn(n, c, scale=3.0)
    logp = (logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))).astype(dtype)
    target = np.array([0, 4, -1, 2, 2, -100, 1], dtype=np.int64)  # < 0: ignored rows
    scale = RNG.uniform(0.1, 2.0, n).astype(dtype)
    ref = np.zeros((n, c))
    for r in range(n):  # row_scale * (softmax - smoothed one-hot), 0 on ignored rows
        if target[r] >= 0:
            q = np.full(c, smoothing / c)
            q[target[r]] += 1.0 - smoothing
            ref[r] = scale[r] * (np.exp(logp[r].astype(np.float64)) - q)
    dx = ck.cross_entropy_grad(logp, target, scale, smoothing)
    assert dx.dtype == dtype and dx.shape == (n, c)
    np.testing.assert_allclose(dx, ref, **TOL[dtype])
    assert not dx[[2, 5]].any()
    # row_scale in another float dtype is cast; the target must be int64 (raw int64: CuPy checks exactly)
    np.testing.assert_array_equal(ck.cross_entropy_grad(logp, target, scale.astype(np.float64), smoothing), dx)
    with pytest.raises(TypeError, match="mismatched"):
        ck.cross_entropy_grad(logp, target.astype(np.int32), scale, smoothing)


SGD_CASES = [dict(), dict(weight_decay=0.1), dict(momentum=0.9), dict(momentum=0.9, dampening=0.3),
             dict(momentum=0.9, nesterov=True), dict(momentum=0.8, weight_decay=0.05, nesterov=True),
             dict(momentum=0.9, dampening=0.5, weight_decay=0.01)]


@pytest.mark.parametrize("kw", SGD_CASES, ids=lambda kw: ",".join(kw) or "plain")
@pytest.mark.parametrize("dtype", FLOATS)
def test_sgd_matches_numpy_update(ck, dtype, kw):
    p_ref = randn(6, 7, dtype=dtype)
    p0, p, buf_ref, buf, first_buf = p_ref.copy(), p_ref.copy(), None, None, None
    args = (kw.get("momentum", 0.0), kw.get("dampening", 0.0), kw.get("nesterov", False),
            kw.get("weight_decay", 0.0))
    for step in range(3):
        g = randn(6, 7, dtype=dtype)
        g_before = g.copy()
        buf_ref = sgd_update(np, p_ref, g, buf_ref, 0.1, *args, False)
        buf = ck.sgd_(p, g, buf, 0.1, **kw)
        np.testing.assert_array_equal(g, g_before)  # the gradient is left untouched
        np.testing.assert_allclose(p, p_ref, **TOL[dtype])
        assert p.dtype == dtype
        if not kw.get("momentum"):
            assert buf is None
            continue
        assert buf.dtype == dtype and buf.shape == p.shape
        np.testing.assert_allclose(buf, buf_ref, **TOL[dtype])
        first_buf = buf if step == 0 else first_buf
        assert buf is first_buf  # created on the first step, then updated in place
    assert np.abs(p - p0).min() > 0  # every element moved


@pytest.mark.parametrize("weight_decay, decoupled", [(0.0, False), (0.1, False), (0.1, True)],
                         ids=["adam", "adam-l2", "adamw"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_adam_matches_numpy_update(ck, dtype, weight_decay, decoupled):
    p_ref = randn(5, 9, dtype=dtype)
    p, m, v = p_ref.copy(), np.zeros_like(p_ref), np.zeros_like(p_ref)
    m_ref, v_ref = m.copy(), v.copy()
    for step in range(1, 5):
        g = randn(5, 9, dtype=dtype)
        g[0, 0] = 0.0
        adam_update(np, p_ref, g, m_ref, v_ref, None, step, 0.01, 0.9, 0.999, 1e-8, weight_decay, decoupled,
                    False)
        ck.adam_(p, g, m, v, 0.01, 0.9, 0.999, 1e-8, weight_decay, step, decoupled)
        for a, ref in ((p, p_ref), (m, m_ref), (v, v_ref)):
            assert a.dtype == dtype
            np.testing.assert_allclose(a, ref, **TOL[dtype])


def test_fake_cupy_semantics(ck):
    """What the checks above rely on: CuPy's type rules, broadcasting, in-place outputs, `i`."""
    k = cupy_on_cpu.ElementwiseKernel("T x, T y, int32 n", "T z, raw int64 idx", "z = z + x * y + n; idx[i] = i",
                                      "k")
    x, y = np.arange(6.0).reshape(2, 3)[:, ::-1], np.float64(2.0)  # non-contiguous x, scalar y
    z, idx = np.ones((2, 3)), np.zeros(6, np.int64)
    out = k(x, y, 1, z, idx)
    assert out[0] is z and out[1] is idx
    np.testing.assert_array_equal(z, 1 + 2 * x + 1)
    np.testing.assert_array_equal(idx, np.arange(6))
    zt = np.ones((3, 2)).T  # a non-contiguous output is updated in place too
    k(x, y, 1, zt, idx)
    np.testing.assert_array_equal(zt, 1 + 2 * x + 1)
    with pytest.raises(TypeError, match="mismatched"):  # arrays decide T, and must agree
        k(x.astype(np.float32), y, 1, z, idx)
    with pytest.raises(TypeError, match="mismatched"):  # concrete types are exact
        k(x, y, 1, z, idx.astype(np.int32))
    add = cupy_on_cpu.ElementwiseKernel("T a, T b", "T c", "c = a + b", "add")
    c = add(np.ones((2, 1), np.float32), np.arange(3, dtype=np.float32))
    assert c.dtype == np.float32 and c.shape == (2, 3)
    np.testing.assert_array_equal(c, [[1, 2, 3], [1, 2, 3]])


def test_every_kernel_is_in_the_catalogue(ck):
    """The NVRTC check (make test-cuda) compiles what KERNELS lists: every kernel of the module is there,
    with the type bindings it is called with; a second kernel of the same name is refused."""
    built = {k.name: k for k in vars(ck).values() if isinstance(k, (cupy_on_cpu.ElementwiseKernel,
                                                                      cupy_on_cpu.RawKernel))}
    assert len(built) >= 13 and {n: s.kernel for n, s in ck.KERNELS.items()} == built
    for name, spec in ck.KERNELS.items():
        assert name.startswith("minigrad_") and spec.kind in ("elementwise", "raw")
        if spec.kind == "elementwise":
            assert spec.types and spec.scalars <= {p.name for p in spec.kernel.ins}
    assert ck.KERNELS["minigrad_adam"].scalars == {"lr", "beta1", "beta2", "eps", "wd", "bc1", "bc2", "decoupled"}
    with pytest.raises(ValueError, match="'minigrad_div' already exists"):
        ck.elementwise("T a", "T b", "b = a", "minigrad_div", types=ck.FLOATS)


# --- the wiring: ops and optimizers on a device whose backend has the fused kernels ---------------
@pytest.fixture
def fused_calls(ck, monkeypatch):
    """The emulated 'cuda' backend with the fake-compiled kernels as ``fused``; counts kernel calls."""
    if backend_cuda.probe()[0] != "emulated":
        pytest.skip("needs the NumPy CUDA emulator (MINIGRAD_EMULATE_CUDA=1)")
    monkeypatch.setattr(mg.backend.get_backend(mg.device("cuda")), "fused", ck)
    calls = collections.Counter()
    for name in ("gelu", "gelu_backward", "softmax", "log_softmax", "softmax_backward", "log_softmax_backward",
                 "cross_entropy_grad", "sgd_", "adam_", "amp_unscale_", "amp_cast_copy_"):
        def spy(*args, _fn=getattr(ck, name), _name=name, **kwargs):
            calls[_name] += 1
            return _fn(*args, **kwargs)
        monkeypatch.setattr(ck, name, spy)
    return calls


def on_both(fn, x, g, *extra):
    """fn(x, *extra) forward and backward (upstream g) on 'cpu' and 'cuda': [(out, x.grad)] per device."""
    res = []
    for dev in ("cpu", "cuda"):
        xt = mg.tensor(x, device=dev, requires_grad=True)
        y = fn(xt, *[mg.tensor(e, device=dev) if isinstance(e, np.ndarray) else e for e in extra])
        y.backward(mg.tensor(np.asarray(g, dtype=x.dtype), device=dev))
        assert y.device == dev and xt.grad.device == dev
        res.append((y.detach().numpy(), xt.grad.numpy()))
    (y_cpu, dx_cpu), (y_cuda, dx_cuda) = res
    np.testing.assert_allclose(y_cuda, y_cpu, **TOL[np.float32])
    np.testing.assert_allclose(dx_cuda, dx_cpu, **TOL[np.float32])
    assert y_cuda.dtype == y_cpu.dtype and dx_cuda.dtype == dx_cpu.dtype == x.dtype


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_on_cuda_uses_fused_kernels(fused_calls, approximate):
    x = randn(5, 6, dtype=np.float32, scale=2.0)
    on_both(lambda t: F.gelu(t, approximate=approximate), x, randn(5, 6, dtype=np.float32))
    assert fused_calls == {"gelu": 1, "gelu_backward": 1}


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_on_cuda_uses_fused_kernels(fused_calls, op, dim):
    x = randn(3, 4, 5, dtype=np.float32, scale=3.0)
    on_both(lambda t: getattr(F, op)(t, dim=dim), x, randn(3, 4, 5, dtype=np.float32))
    assert fused_calls == {op: 1, op + "_backward": 1}


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("variant", ["plain", "ignore_index=2", "weight", "unbatched", "spatial"])
def test_cross_entropy_on_cuda_matches_cpu(fused_calls, variant, reduction, smoothing):
    n, c = 6, 4
    shape, target = (n, c), np.array([0, 3, -100, 2, 1, 2], dtype=np.int64)
    kw = dict(reduction=reduction, label_smoothing=smoothing)
    if variant == "ignore_index=2":
        target[2], kw["ignore_index"] = 1, 2
    elif variant == "weight":
        weight = RNG.uniform(0.5, 2.0, c).astype(np.float32)
    elif variant == "unbatched":
        shape, target = (c,), np.array(3, dtype=np.int64)
    elif variant == "spatial":
        shape, target = (n, c, 3), RNG.integers(0, c, (n, 3))
        target[0, 1] = -100
    x = randn(*shape, dtype=np.float32, scale=2.0)

    def loss(t, tgt):
        w = None if variant != "weight" else mg.tensor(weight, device=t.device)
        return F.cross_entropy(t, tgt, weight=w, **kw)

    out_shape = target.shape if reduction == "none" else ()
    on_both(loss, x, randn(*out_shape, dtype=np.float32) if out_shape else np.float32(1.7), target)
    fused_grad = variant in ("plain", "ignore_index=2", "unbatched")  # 2-D logits, no class weights
    assert fused_calls == {"log_softmax": 1, **({"cross_entropy_grad": 1} if fused_grad else {})}


OPTIMIZERS = [
    (lambda ps: optim.SGD(ps, lr=0.1), "sgd_"),
    (lambda ps: optim.SGD(ps, lr=0.1, weight_decay=0.01), "sgd_"),
    (lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.2), "sgd_"),
    (lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01), "sgd_"),
    (lambda ps: optim.Adam(ps, lr=0.01), "adam_"),
    (lambda ps: optim.Adam(ps, lr=0.01, weight_decay=0.1), "adam_"),
    (lambda ps: optim.AdamW(ps, lr=0.01, weight_decay=0.1), "adam_"),
    (lambda ps: optim.Adam(ps, lr=0.01, amsgrad=True), None),  # AMSGrad: the NumPy update, not fused
]


@pytest.mark.parametrize("make_opt, kernel", OPTIMIZERS,
                         ids=["sgd", "sgd-wd", "sgd-momentum", "sgd-nesterov", "adam", "adam-l2", "adamw",
                              "amsgrad"])
def test_optimizer_steps_on_cuda_match_cpu(fused_calls, make_opt, kernel):
    x, y = randn(8, 4, dtype=np.float32), randn(8, 3, dtype=np.float32)
    cpu = nn.Linear(4, 3)
    cuda = nn.Linear(4, 3)
    cuda.load_state_dict(cpu.state_dict())
    cuda.to("cuda")
    start = [p.detach().numpy().copy() for p in cpu.parameters()]
    for model, dev in ((cpu, "cpu"), (cuda, "cuda")):
        opt = make_opt(model.parameters())
        xt, yt = mg.tensor(x, device=dev), mg.tensor(y, device=dev)
        for _ in range(4):
            opt.zero_grad()
            F.mse_loss(model(xt), yt).backward()
            opt.step()
    for p_cpu, p_cuda, p0 in zip(cpu.parameters(), cuda.parameters(), start):
        assert p_cuda.device == "cuda" and p_cuda.dtype == mg.float32
        assert np.abs(p_cpu.detach().numpy() - p0).max() > 1e-3  # the steps moved the parameters
        np.testing.assert_allclose(p_cuda.detach().numpy(), p_cpu.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert fused_calls == ({kernel: 4 * 2} if kernel else {})  # 4 steps x (weight, bias), on 'cuda' only


def test_gpu_kernel_check_launches_every_kernel(fused_calls):
    """make gpu-check compares every kernel with NumPy only if its cases reach every wrapper: run them on
    the emulated device with the fake-compiled kernels (float32/float64: what the fake compiles)."""
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks"))
    try:
        import gpu_kernel_check
    finally:
        sys.path.pop(0)
    for name, dtypes, fn in gpu_kernel_check.catalogue_cases():
        fn("float32" if "float32" in dtypes.split() else "float64", "cuda")
    assert set(fused_calls) == {"gelu", "gelu_backward", "softmax", "log_softmax", "softmax_backward",
                                "log_softmax_backward", "cross_entropy_grad", "sgd_", "adam_", "amp_unscale_",
                                "amp_cast_copy_"}


def test_float16_is_computed_in_float32(ck):
    """CUDA's half type lacks erf/tanh overloads on some toolkits: the wrappers run float16 through the
    float32 kernels (the fake refuses float16 kernels, so reaching one would fail) and cast back."""
    x = randn(3, 17, dtype=np.float16, scale=2.0)
    g = randn(3, 17, dtype=np.float16)
    for out, ref in ((ck.gelu(x, "none"), ck.gelu(x.astype(np.float32), "none")),
                     (ck.gelu_backward(x, g, "tanh"), ck.gelu_backward(x.astype(np.float32), g.astype(np.float32),
                                                                      "tanh")),
                     (ck.softmax(x, 1), ck.softmax(x.astype(np.float32), 1)),
                     (ck.log_softmax(x, 0), ck.log_softmax(x.astype(np.float32), 0))):
        assert out.dtype == np.float16
        np.testing.assert_array_equal(out, ref.astype(np.float16))


def test_float16_parameters_take_the_plain_optimizer_path(fused_calls):
    model = nn.Linear(4, 3).to("cuda").to(mg.float16)
    opt = optim.Adam(model.parameters(), lr=0.01)
    F.mse_loss(model(mg.randn(5, 4, device="cuda", dtype=mg.float16)),
               mg.randn(5, 3, device="cuda", dtype=mg.float16)).backward()
    before = model.weight.detach().numpy().copy()
    opt.step()
    assert model.weight.dtype == mg.float16 and not np.array_equal(model.weight.detach().numpy(), before)
    assert fused_calls == {}
