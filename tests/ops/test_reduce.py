"""Reductions: float64 gradchecks over dims/keepdim, values vs NumPy, dim/axis aliases, hypothesis fuzzing."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import minigrad as mg
from minigrad.autograd import gradcheck
from minigrad.errors import ArgumentError, DTypeError, OpIndexError

FUZZ = settings(max_examples=40, deadline=None)


def T(arr, device, grad=True, dtype=np.float64):
    return mg.tensor(np.asarray(arr, dtype=dtype), device=device, requires_grad=grad)


def host(t):
    return t.detach().cpu().numpy()


def distinct(shape, seed=0):
    """Values with no ties (max/min are differentiable there), spaced far beyond gradcheck's eps."""
    n = int(np.prod(shape))
    return (np.random.default_rng(seed).permutation(n).reshape(shape) * 0.1 - 0.3 * n / 10).astype(np.float64)


DIMS = [dict(), dict(dim=0), dict(dim=1), dict(dim=-1), dict(dim=(0, 2)), dict(dim=1, keepdim=True),
        dict(dim=(0, 1), keepdim=True), dict(keepdim=True)]

REDUCTIONS = {
    "sum": lambda x, **k: x.sum(**k),
    "mean": lambda x, **k: x.mean(**k),
    "var": lambda x, **k: x.var(**k),
    "var_c0": lambda x, **k: x.var(correction=0, **k),
    "var_unbiased_false": lambda x, **k: mg.var(x, unbiased=False, **k),
    "std": lambda x, **k: x.std(**k),
    "std_c0": lambda x, **k: mg.std(x, correction=0, **k),
    "logsumexp": lambda x, **k: x.logsumexp(**k) if k else x.logsumexp(dim=(0, 1, 2)),
    "amax": lambda x, **k: x.amax(**k) if k else x.amax(),
    "amin": lambda x, **k: mg.amin(x, **k),
    "fn_sum": lambda x, **k: mg.sum(x, **k),
    "fn_mean": lambda x, **k: mg.mean(x, **k),
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@pytest.mark.parametrize("kw", DIMS, ids=str)
def test_reduction_gradcheck(name, kw, device):
    x = T(distinct((2, 3, 4)), device)
    assert gradcheck(lambda t: REDUCTIONS[name](t, **kw), (x,))


NP_REF = {
    "sum": lambda x, axis, keepdims: x.sum(axis=axis, keepdims=keepdims),
    "mean": lambda x, axis, keepdims: x.mean(axis=axis, keepdims=keepdims),
    "var": lambda x, axis, keepdims: x.var(axis=axis, keepdims=keepdims, ddof=1),
    "var_c0": lambda x, axis, keepdims: x.var(axis=axis, keepdims=keepdims),
    "var_unbiased_false": lambda x, axis, keepdims: x.var(axis=axis, keepdims=keepdims),
    "std": lambda x, axis, keepdims: x.std(axis=axis, keepdims=keepdims, ddof=1),
    "std_c0": lambda x, axis, keepdims: x.std(axis=axis, keepdims=keepdims),
    "logsumexp": lambda x, axis, keepdims: np.log(np.exp(x).sum(axis=axis, keepdims=keepdims)),
    "amax": lambda x, axis, keepdims: x.max(axis=axis, keepdims=keepdims),
    "amin": lambda x, axis, keepdims: x.min(axis=axis, keepdims=keepdims),
    "fn_sum": lambda x, axis, keepdims: x.sum(axis=axis, keepdims=keepdims),
    "fn_mean": lambda x, axis, keepdims: x.mean(axis=axis, keepdims=keepdims),
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@pytest.mark.parametrize("kw", DIMS, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_reduction_values_match_numpy(name, kw, dtype, device):
    x = np.random.default_rng(1).standard_normal((2, 3, 4)).astype(dtype)
    out = REDUCTIONS[name](mg.tensor(x, device=device), **kw)
    axis = kw.get("dim", (0, 1, 2) if name == "logsumexp" and not kw else None)
    want = NP_REF[name](x, axis, kw.get("keepdim", False))
    assert out.shape == np.shape(want)
    assert out.dtype.np_dtype == np.dtype(dtype)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(host(out), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("name", ["sum", "mean", "var", "std", "logsumexp", "amax", "amin", "prod", "max", "min"])
def test_axis_keepdims_aliases(name, device):
    x = mg.tensor(distinct((2, 3, 4)), device=device)
    fn = getattr(mg, name)
    a = fn(x, dim=1, keepdim=True)
    b = fn(x, axis=1, keepdims=True)
    if isinstance(a, tuple):
        a, b = a[0], b[0]
    assert a.shape == (2, 1, 4)
    np.testing.assert_array_equal(host(a), host(b))
    with pytest.raises(ArgumentError, match="got both dim and axis"):
        fn(x, dim=1, axis=1)


def test_sum_with_list_dims_and_dtype(device):
    x = mg.tensor(np.arange(24.0).reshape(2, 3, 4), device=device)
    np.testing.assert_array_equal(host(x.sum(dim=[0, 2])), np.arange(24.0).reshape(2, 3, 4).sum((0, 2)))
    assert x.sum(dtype=mg.float32).dtype == mg.float32
    ints = mg.tensor([[1, 2], [3, 4]], device=device)
    assert ints.sum().dtype == mg.int64 and ints.sum().item() == 10
    assert mg.tensor([True, True, False], device=device).sum().item() == 2
    assert ints.mean(dtype=mg.float64).item() == 2.5


def test_mean_backward_value(device):
    x = T(np.ones((2, 5)), device)
    x.mean(dim=1).sum().backward()
    np.testing.assert_allclose(host(x.grad), np.full((2, 5), 0.2))


def test_var_backward_value(device):
    data = np.array([1.0, 2.0, 4.0, 7.0])
    x = T(data, device)
    x.var().backward()
    np.testing.assert_allclose(host(x.grad), 2 * (data - data.mean()) / 3)


# --- max / min with indices -----------------------------------------------------------------------------
@pytest.mark.parametrize("take_min", [False, True])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_min_dim_values_indices_and_grad(take_min, dim, keepdim, device):
    data = distinct((3, 4, 2), seed=2)
    x = T(data, device)
    fn = mg.min if take_min else mg.max
    res = fn(x, dim, keepdim)
    values, indices = res
    assert res.values is values and res.indices is indices
    want_idx = (data.argmin if take_min else data.argmax)(axis=dim)
    want_val = (data.min if take_min else data.max)(axis=dim)
    if keepdim:
        want_idx, want_val = np.expand_dims(want_idx, dim), np.expand_dims(want_val, dim)
    np.testing.assert_array_equal(host(values), want_val)
    np.testing.assert_array_equal(host(indices), want_idx)
    assert indices.dtype == mg.int64 and not indices.requires_grad
    assert gradcheck(lambda t: fn(t, dim, keepdim)[0], (x,))


def test_max_dim_ties_send_gradient_to_one_index(device):
    x = T([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]], device)
    values, indices = x.max(dim=1)
    np.testing.assert_array_equal(host(values), [3.0, 2.0])
    values.sum().backward()
    g = host(x.grad)
    assert g.sum() == 2.0 and np.all(g.sum(axis=1) == 1.0)
    idx = host(indices)
    assert g[0, idx[0]] == 1.0 and g[1, idx[1]] == 1.0


def test_full_max_min_ties_share_gradient(device):
    x = T([[1.0, 3.0], [3.0, 0.0]], device)
    m = x.max()
    assert m.shape == () and m.item() == 3.0
    m.backward()
    np.testing.assert_allclose(host(x.grad), [[0.0, 0.5], [0.5, 0.0]])
    y = T([[1.0, 3.0], [3.0, 0.0]], device)
    assert y.min().item() == 0.0
    y.min().backward()
    np.testing.assert_allclose(host(y.grad), [[0.0, 0.0], [0.0, 1.0]])


def test_full_max_min_gradcheck(device):
    x = T(distinct((3, 4)), device)
    assert gradcheck(lambda t: t.max(), (x,))
    assert gradcheck(lambda t: mg.min(t), (x,))
    assert gradcheck(lambda t: t.amax(dim=(0, 1)), (x,))


def test_argmax_argmin(device):
    data = distinct((3, 4), seed=3)
    x = mg.tensor(data, device=device)
    assert x.argmax().item() == data.argmax() and x.argmax().shape == ()
    assert mg.argmin(x).item() == data.argmin()
    np.testing.assert_array_equal(host(x.argmax(dim=1)), data.argmax(1))
    np.testing.assert_array_equal(host(x.argmax(axis=0)), data.argmax(0))
    np.testing.assert_array_equal(host(x.argmin(dim=0, keepdim=True)), data.argmin(0)[None])
    assert x.argmax(keepdim=True).shape == (1, 1)
    assert x.argmax().dtype == mg.int64
    assert not mg.tensor(data, requires_grad=True, device=device).argmax(1).requires_grad


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # log(0) = -inf is the answer
def test_logsumexp_is_stable_for_large_inputs(device):
    x = T([[1000.0, 1000.0], [-1000.0, -1000.0]], device)
    out = x.logsumexp(dim=1)
    np.testing.assert_allclose(host(out), [1000.0 + np.log(2), -1000.0 + np.log(2)])
    out.sum().backward()
    np.testing.assert_allclose(host(x.grad), np.full((2, 2), 0.5))
    y = T([-np.inf, -np.inf], device, grad=False)
    assert host(y.logsumexp(0)) == -np.inf


# --- prod, cumsum ------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw", [dict(), dict(dim=0), dict(dim=1, keepdim=True), dict(dim=-1)], ids=str)
@pytest.mark.parametrize("zeros", [0, 1, 2])
def test_prod_gradcheck_with_zeros(kw, zeros, device):
    data = np.random.default_rng(4).uniform(0.5, 1.5, (3, 4)) * np.random.default_rng(5).choice([-1, 1], (3, 4))
    if zeros >= 1:
        data[1, 2] = 0.0
    if zeros == 2:
        data[1, 0] = 0.0
        data[2, 2] = 0.0
    x = T(data, device)
    out = x.prod(**kw)
    np.testing.assert_allclose(host(out), data.prod(axis=kw.get("dim"), keepdims=kw.get("keepdim", False)))
    assert gradcheck(lambda t: t.prod(**kw), (x,))


def test_prod_grad_single_zero_exact(device):
    x = T([2.0, 0.0, 3.0], device)
    x.prod().backward()
    np.testing.assert_array_equal(host(x.grad), [0.0, 6.0, 0.0])


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum(dim, device):
    data = np.random.default_rng(6).standard_normal((3, 4))
    x = T(data, device)
    np.testing.assert_allclose(host(x.cumsum(dim)), np.cumsum(data, axis=dim))
    np.testing.assert_allclose(host(mg.cumsum(x, axis=dim)), np.cumsum(data, axis=dim))
    assert gradcheck(lambda t: t.cumsum(dim), (x,))


def test_cumsum_requires_dim(device):
    with pytest.raises(ArgumentError, match="cumsum"):
        mg.tensor([1.0, 2.0], device=device).cumsum()


def test_norm(device):
    data = np.random.default_rng(7).standard_normal((3, 4))
    x = T(data, device)
    np.testing.assert_allclose(host(x.norm()), np.linalg.norm(data))
    np.testing.assert_allclose(host(x.norm(p=1, dim=1)), np.abs(data).sum(1))
    assert gradcheck(lambda t: t.norm(dim=0), (x,))


def test_reduction_errors(device):
    x = mg.tensor(np.ones((2, 3)), device=device)
    with pytest.raises(OpIndexError, match="sum: dim 2"):
        x.sum(2)
    with pytest.raises(OpIndexError, match="mean"):
        x.mean(dim=(0, 5))
    with pytest.raises(DTypeError, match="mean"):
        mg.tensor([1, 2], device=device).mean()
    with pytest.raises(ArgumentError, match="prod"):
        x.prod(dim=(0, 1))


def test_all_any(device):
    x = mg.tensor([[True, False], [True, True]], device=device)
    assert not mg.all(x).item() and mg.any(x).item()
    np.testing.assert_array_equal(host(x.all(dim=1)), [False, True])
    np.testing.assert_array_equal(host(x.any(0)), [True, True])


@pytest.mark.parametrize("name", ["sum", "mean", "var", "std", "logsumexp", "amax", "prod", "max", "cumsum"])
def test_float32_grads_stay_float32(name, device):
    x = mg.tensor(distinct((2, 3)).astype(np.float32), device=device, requires_grad=True)
    out = getattr(x, name)(1)
    out = out[0] if isinstance(out, tuple) else out
    out.sum().backward()
    assert x.grad.dtype == mg.float32 and x.grad.shape == (2, 3)


# --- hypothesis ------------------------------------------------------------------------------------------
def _dims(shape):
    """Strategy: None, one dim (maybe negative) or a tuple of distinct dims for ``shape``."""
    n = len(shape)
    if n == 0:
        return st.none()
    one = st.integers(-n, n - 1)
    many = st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True).map(tuple)
    return st.one_of(st.none(), one, many)


def _expand(g, shape, axis, keepdims):
    if axis is None:
        return np.broadcast_to(np.reshape(g, (1,) * len(shape)), shape)
    axes = (axis,) if isinstance(axis, int) else axis
    if not keepdims:
        g = np.expand_dims(g, tuple(a % len(shape) for a in axes))
    return np.broadcast_to(g, shape)


@st.composite
def reduction_case(draw):
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=1, max_side=4))
    axis = draw(_dims(shape))
    keepdims = draw(st.booleans())
    data = draw(hnp.arrays(np.float64, shape, elements=st.floats(-3, 3)))
    return data, axis, keepdims


@FUZZ
@given(case=reduction_case(), name=st.sampled_from(["sum", "mean", "amax", "logsumexp", "var"]))
def test_fuzz_reductions(case, name):
    data, axis, keepdims = case
    x = mg.tensor(data, requires_grad=True)
    n = data.size if axis is None else int(np.prod([data.shape[a] for a in np.atleast_1d(axis)]))
    if name == "var" and n < 2:
        return
    out = getattr(mg, name)(x, dim=axis, keepdim=keepdims)
    if name == "sum":
        want = data.sum(axis=axis, keepdims=keepdims)
    elif name == "mean":
        want = data.mean(axis=axis, keepdims=keepdims)
    elif name == "amax":
        want = data.max(axis=axis, keepdims=keepdims)
    elif name == "var":
        want = data.var(axis=axis, keepdims=keepdims, ddof=1)
    else:
        m = data.max(axis=axis, keepdims=True)
        want = np.log(np.exp(data - m).sum(axis=axis, keepdims=True)) + m
        want = want if keepdims else (want.reshape(()) if axis is None else np.squeeze(want, axis))
    assert out.shape == np.shape(want)
    np.testing.assert_allclose(host(out), want, rtol=1e-10, atol=1e-10)

    g = np.random.default_rng(0).standard_normal(np.shape(want))
    out.backward(mg.tensor(g))
    ge = _expand(g, data.shape, axis, keepdims)
    if name == "sum":
        ref = ge
    elif name == "mean":
        ref = ge / n
    elif name == "var":
        ref = ge * 2 * (data - data.mean(axis=axis, keepdims=True)) / (n - 1)
    elif name == "amax":
        mask = data == data.max(axis=axis, keepdims=True)
        ref = ge * mask / mask.sum(axis=axis, keepdims=True)
    else:
        ref = ge * np.exp(data - _expand(want, data.shape, axis, keepdims))
    np.testing.assert_allclose(host(x.grad), ref, rtol=1e-9, atol=1e-10)
