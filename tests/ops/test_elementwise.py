"""Elementwise ops: float64 gradchecks (with broadcasting), values vs NumPy, dtype rules, hypothesis fuzzing."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import minigrad as mg
from minigrad.autograd import gradcheck

FUZZ = settings(max_examples=40, deadline=None)


def T(arr, device, grad=True, dtype=np.float64):
    return mg.tensor(np.asarray(arr, dtype=dtype), device=device, requires_grad=grad)


def host(t):
    return t.detach().cpu().numpy()


def sum_to(g, shape):
    """Reference un-broadcast: sum ``g`` down to ``shape``."""
    lead = g.ndim - len(shape)
    g = g.sum(axis=tuple(range(lead))) if lead else g
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    return g.sum(axis=axes, keepdims=True) if axes else g


BROADCAST_PAIRS = [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 3), (4, 1)), ((), (2, 3)), ((3, 1), (1, 3)),
                   ((2, 3), ())]


# --- gradchecks ------------------------------------------------------------------------------------
BINARY = {
    "add": (lambda a, b: a + b, lambda rng, s: rng.standard_normal(s)),
    "sub": (lambda a, b: a - b, lambda rng, s: rng.standard_normal(s)),
    "mul": (lambda a, b: a * b, lambda rng, s: rng.standard_normal(s)),
    "div": (lambda a, b: a / b, lambda rng, s: rng.uniform(0.5, 2.0, s) * rng.choice([-1, 1], s)),
    "pow": (lambda a, b: a ** b, lambda rng, s: rng.uniform(0.5, 2.0, s)),
    "maximum": (mg.maximum, lambda rng, s: rng.standard_normal(s)),
    "minimum": (mg.minimum, lambda rng, s: rng.standard_normal(s)),
    "fn_add": (mg.add, lambda rng, s: rng.standard_normal(s)),
    "fn_sub": (mg.sub, lambda rng, s: rng.standard_normal(s)),
    "fn_mul": (mg.mul, lambda rng, s: rng.standard_normal(s)),
    "fn_div": (mg.div, lambda rng, s: rng.uniform(0.5, 2.0, s)),
    "fn_pow": (mg.pow, lambda rng, s: rng.uniform(0.5, 2.0, s)),
}


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("shapes", BROADCAST_PAIRS, ids=str)
def test_binary_gradcheck(name, shapes, device):
    fn, sample = BINARY[name]
    rng = np.random.default_rng(1)
    a = T(sample(rng, shapes[0]), device)
    b = T(sample(rng, shapes[1]), device)
    assert gradcheck(fn, (a, b))


@pytest.mark.parametrize("shapes", BROADCAST_PAIRS, ids=str)
def test_binary_gradcheck_only_one_input_requires_grad(shapes, device):
    rng = np.random.default_rng(2)
    a = T(rng.standard_normal(shapes[0]), device)
    b = T(rng.uniform(0.5, 2, shapes[1]), device, grad=False)
    for fn in (lambda x, y: x * y, lambda x, y: x / y, lambda x, y: y / x.abs().clamp(min=0.5), mg.sub):
        assert gradcheck(fn, (a, b))
        assert b.grad is None


UNARY = {
    "neg": (lambda a: -a, lambda rng, s: rng.standard_normal(s)),
    "exp": (mg.exp, lambda rng, s: rng.standard_normal(s)),
    "log": (mg.log, lambda rng, s: rng.uniform(0.2, 3.0, s)),
    "sqrt": (mg.sqrt, lambda rng, s: rng.uniform(0.2, 3.0, s)),
    "abs": (mg.abs, lambda rng, s: rng.uniform(0.2, 3.0, s) * rng.choice([-1, 1], s)),
    "sin": (mg.sin, lambda rng, s: rng.standard_normal(s)),
    "cos": (mg.cos, lambda rng, s: rng.standard_normal(s)),
    "square": (mg.square, lambda rng, s: rng.standard_normal(s)),
    "rsqrt": (mg.rsqrt, lambda rng, s: rng.uniform(0.2, 3.0, s)),
    "pow_scalar": (lambda a: a ** 3, lambda rng, s: rng.standard_normal(s)),
    "pow_square": (lambda a: a ** 2, lambda rng, s: rng.standard_normal(s)),
    "pow_frac": (lambda a: a ** 0.5, lambda rng, s: rng.uniform(0.2, 3.0, s)),
    "pow_neg": (lambda a: a ** -1.5, lambda rng, s: rng.uniform(0.2, 3.0, s)),
    "rpow": (lambda a: 2 ** a, lambda rng, s: rng.standard_normal(s)),
    "rpow_float": (lambda a: 0.7 ** a, lambda rng, s: rng.standard_normal(s)),
    "rsub": (lambda a: 2 - a, lambda rng, s: rng.standard_normal(s)),
    "rdiv": (lambda a: 2 / a, lambda rng, s: rng.uniform(0.5, 2.0, s)),
    "radd": (lambda a: 2.5 + a, lambda rng, s: rng.standard_normal(s)),
    "rmul": (lambda a: 2.5 * a, lambda rng, s: rng.standard_normal(s)),
    "clamp_both": (lambda a: a.clamp(-0.5, 0.5), lambda rng, s: _away(rng.standard_normal(s), (-0.5, 0.5))),
    "clamp_min": (lambda a: a.clamp(min=0.1), lambda rng, s: _away(rng.standard_normal(s), (0.1,))),
    "clamp_max": (lambda a: mg.clamp(a, max=0.2), lambda rng, s: _away(rng.standard_normal(s), (0.2,))),
    "method_exp": (lambda a: a.exp().log().sin(), lambda rng, s: rng.standard_normal(s)),
}


def _away(x, points, gap=1e-3):
    """Move values off the kinks of clamp so central differences are meaningful."""
    for p in points:
        x = np.where(np.abs(x - p) < gap, p + 2 * gap, x)
    return x


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("shape", [(), (5,), (2, 3, 4)], ids=str)
def test_unary_gradcheck(name, shape, device):
    fn, sample = UNARY[name]
    a = T(sample(np.random.default_rng(3), shape), device)
    assert gradcheck(fn, (a,))


def test_where_gradcheck_broadcast(device):
    rng = np.random.default_rng(4)
    cond = mg.tensor(rng.random((3, 1)) > 0.5, device=device)
    a = T(rng.standard_normal((3, 4)), device)
    b = T(rng.standard_normal((4,)), device)
    assert gradcheck(lambda x, y: mg.where(cond, x, y), (a, b))
    assert gradcheck(lambda x: mg.where(cond, x, 0.0), (a,))
    assert gradcheck(lambda y: mg.where(cond, 1.0, y), (b,))
    assert gradcheck(lambda x, y: x.where(cond, y), (a, b))


def test_clamp_with_tensor_bounds_gradcheck(device):
    rng = np.random.default_rng(5)
    a = T(rng.standard_normal((3, 4)), device)
    lo = T(np.full((4,), -0.3) + rng.uniform(-0.1, 0.1, 4), device)
    hi = T(np.full((3, 1), 0.4), device)
    out = mg.clamp(a, lo, hi)
    np.testing.assert_allclose(host(out), np.minimum(np.maximum(host(a), host(lo)), host(hi)))
    assert gradcheck(lambda x, l, h: mg.clamp(x, l, h), (a, lo, hi))


def test_maximum_minimum_ties_split_gradient(device):
    a = T([1.0, 2.0, 3.0], device)
    b = T([1.0, 5.0, 0.0], device)
    mg.maximum(a, b).sum().backward()
    np.testing.assert_allclose(host(a.grad), [0.5, 0.0, 1.0])
    np.testing.assert_allclose(host(b.grad), [0.5, 1.0, 0.0])
    a.grad = b.grad = None
    mg.minimum(a, b).sum().backward()
    np.testing.assert_allclose(host(a.grad), [0.5, 1.0, 0.0])
    np.testing.assert_allclose(host(b.grad), [0.5, 0.0, 1.0])
    # central differences at a tie also give 1/2, so gradcheck agrees there
    assert gradcheck(mg.maximum, (T([1.0, 2.0], device), T([1.0, -2.0], device)))
    assert gradcheck(mg.minimum, (T([1.0, 2.0], device), T([1.0, -2.0], device)))


def test_max_min_of_two_tensors_is_maximum(device):
    a = T([1.0, 4.0], device, grad=False)
    b = T([3.0, 2.0], device, grad=False)
    np.testing.assert_array_equal(host(mg.max(a, b)), [3.0, 4.0])
    np.testing.assert_array_equal(host(a.min(b)), [1.0, 2.0])


# --- forward values against NumPy ---------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_forward_values_match_numpy(dtype, device):
    rng = np.random.default_rng(6)
    x = rng.uniform(0.3, 2.0, (3, 4)).astype(dtype)
    y = rng.uniform(0.3, 2.0, (4,)).astype(dtype)
    a, b = mg.tensor(x, device=device), mg.tensor(y, device=device)
    cases = [
        (a + b, x + y), (a - b, x - y), (a * b, x * y), (a / b, x / y), (a ** b, x ** y), (-a, -x),
        (a.exp(), np.exp(x)), (a.log(), np.log(x)), (a.sqrt(), np.sqrt(x)), ((a - 1).abs(), np.abs(x - 1)),
        (a.sin(), np.sin(x)), (a.cos(), np.cos(x)), (a.clamp(0.5, 1.5), np.clip(x, 0.5, 1.5)),
        (mg.maximum(a, b), np.maximum(x, y)), (mg.minimum(a, b), np.minimum(x, y)),
        (mg.where(a > b, a, b), np.where(x > y, x, y)), (2 - a, 2 - x), (2 / a, 2 / x), (2 ** a, 2 ** x),
        (a ** 2, x ** 2), (a.pow(0.5), x ** 0.5), (mg.square(a), x * x), (mg.rsqrt(a), 1 / np.sqrt(x)),
        (y @ a.T, y @ x.T), (x @ b, x @ y), (a // b, x // y), (a % b, x % y),
    ]
    tol = 1e-6 if dtype == np.float32 else 1e-12
    for got, want in cases:
        assert got.dtype.np_dtype == np.dtype(dtype), (got, want)
        np.testing.assert_allclose(host(got), want, rtol=tol, atol=tol)


def test_comparisons_are_bool_and_carry_no_grad(device):
    a = T([1.0, 2.0, 3.0], device)
    b = T([3.0, 2.0, 1.0], device)
    for got, want in [(a < b, [1, 0, 0]), (a <= b, [1, 1, 0]), (a > b, [0, 0, 1]), (a >= b, [0, 1, 1]),
                      (a == b, [0, 1, 0]), (a != b, [1, 0, 1]), (a > 1.5, [0, 1, 1]), (a == 2, [0, 1, 0])]:
        assert got.dtype == mg.bool
        assert not got.requires_grad and got.grad_fn is None
        np.testing.assert_array_equal(host(got), np.array(want, dtype=bool))
    m = (a > 1.5) & (b > 1.5)
    np.testing.assert_array_equal(host(m), [False, True, False])
    np.testing.assert_array_equal(host(~m), [True, False, True])
    np.testing.assert_array_equal(host((a > 2.5) | (b > 2.5)), [True, False, True])
    np.testing.assert_array_equal(host((a > 1.5) ^ (b > 1.5)), [True, False, True])


def test_dtype_promotion_rules(device):
    f32 = mg.tensor([1.0, 2.0], device=device)
    f64 = mg.tensor(np.array([1.0, 2.0]), device=device)
    i64 = mg.tensor([1, 2], device=device)
    assert (f32 + 1).dtype == mg.float32
    assert (f32 * 2.5).dtype == mg.float32
    assert (f32 + f64).dtype == mg.float64
    assert (i64 + 1).dtype == mg.int64
    assert (i64 * 1.5).dtype == mg.float32      # PyTorch: int tensor ∘ Python float → default float
    assert (i64 / 2).dtype == mg.float32        # true division of ints gives floats
    assert (2.5 - i64).dtype == mg.float32
    assert (i64 + f32).dtype == mg.float32
    assert (f32 + np.float64(2.0)).dtype == mg.float32  # NumPy scalars act like Python numbers
    assert (f32 + np.ones(2)).dtype == mg.float32       # arrays take the tensor's float dtype
    np.testing.assert_allclose(host(i64 / 2), [0.5, 1.0])
    np.testing.assert_allclose(host(i64 * 1.5), [1.5, 3.0])


def test_reflected_operators(device):
    x = T([1.0, 2.0, 4.0], device)
    y = 2 - x
    z = 2 / x
    w = 2 ** x
    v = 3 * x
    u = 1 + x
    np.testing.assert_allclose(host(y), [1.0, 0.0, -2.0])
    np.testing.assert_allclose(host(z), [2.0, 1.0, 0.5])
    np.testing.assert_allclose(host(w), [2.0, 4.0, 16.0])
    (y + z + w + v + u).sum().backward()
    want = -1 - 2 / np.array([1.0, 2.0, 4.0]) ** 2 + np.log(2) * np.array([2.0, 4.0, 16.0]) + 3 + 1
    np.testing.assert_allclose(host(x.grad), want)


def test_ndarray_on_the_left_defers_to_tensor(device):
    x = T([1.0, 2.0, 3.0], device)
    arr = np.array([1.0, 2.0, 3.0])
    for got, want in [(arr - x, [0.0, 0.0, 0.0]), (arr * x, [1.0, 4.0, 9.0]), (arr @ x, 14.0),
                      (arr / x, [1.0, 1.0, 1.0]), (arr + x, [2.0, 4.0, 6.0])]:
        assert isinstance(got, mg.Tensor)
        np.testing.assert_allclose(host(got), want)
    (arr @ x).backward()
    np.testing.assert_allclose(host(x.grad), arr)


def test_pow_tensor_scalar_grad_at_zero_is_finite(device):
    x = T([0.0, 1.0, -2.0], device)
    (x ** 2).sum().backward()
    np.testing.assert_allclose(host(x.grad), [0.0, 2.0, -4.0])
    x.grad = None
    (x ** 3).sum().backward()
    np.testing.assert_allclose(host(x.grad), [0.0, 3.0, 12.0])


def test_pow_exponent_grad_ignores_nonpositive_base(device):
    base = T([0.0, 2.0], device)
    e = T([2.0, 3.0], device)
    (base ** e).sum().backward()
    assert np.all(np.isfinite(host(e.grad)))
    np.testing.assert_allclose(host(e.grad), [0.0, 8.0 * np.log(2.0)])


def test_abs_grad_at_zero_is_zero(device):
    x = T([0.0, -1.0, 2.0], device)
    x.abs().sum().backward()
    np.testing.assert_array_equal(host(x.grad), [0.0, -1.0, 1.0])


def test_clamp_grad_flows_at_the_boundary(device):
    x = T([-1.0, 0.0, 0.5, 1.0, 2.0], device)
    x.clamp(0.0, 1.0).sum().backward()
    np.testing.assert_array_equal(host(x.grad), [0.0, 1.0, 1.0, 1.0, 0.0])


def test_where_with_scalar_branches_and_no_grad_result(device):
    cond = mg.tensor([True, False, True], device=device)
    out = mg.where(cond, 1.0, 0.0)
    np.testing.assert_array_equal(host(out), [1.0, 0.0, 1.0])
    assert not out.requires_grad


def test_gradient_dtype_matches_input_for_float32(device):
    a = mg.tensor([1.0, 2.0], device=device, requires_grad=True)
    (a * 2.0 + a.exp() / 3 + 2 ** a).sum().backward()
    assert a.grad.dtype == mg.float32


# --- hypothesis fuzzing -------------------------------------------------------------------------------
def _ref_binary(name, x, y, g):
    """Reference (value, grad_x, grad_y) computed with plain NumPy."""
    if name == "add":
        return x + y, sum_to(g, x.shape), sum_to(g, y.shape)
    if name == "sub":
        return x - y, sum_to(g, x.shape), sum_to(-g, y.shape)
    if name == "mul":
        return x * y, sum_to(g * y, x.shape), sum_to(g * x, y.shape)
    if name == "div":
        return x / y, sum_to(g / y, x.shape), sum_to(-g * x / y ** 2, y.shape)
    if name == "pow":
        out = x ** y
        return out, sum_to(g * y * x ** (y - 1), x.shape), sum_to(g * out * np.log(x), y.shape)
    if name == "maximum":
        s = (x > y) + 0.5 * (x == y)
        return np.maximum(x, y), sum_to(g * s, x.shape), sum_to(g * (1 - s), y.shape)
    if name == "minimum":
        s = (x < y) + 0.5 * (x == y)
        return np.minimum(x, y), sum_to(g * s, x.shape), sum_to(g * (1 - s), y.shape)
    raise AssertionError(name)


_FNS = {"add": mg.add, "sub": mg.sub, "mul": mg.mul, "div": mg.div, "pow": mg.pow, "maximum": mg.maximum,
        "minimum": mg.minimum}


@FUZZ
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, max_side=4),
       name=st.sampled_from(sorted(_FNS)), seed=st.integers(0, 2 ** 16))
def test_fuzz_binary_values_and_grads(shapes, name, seed):
    rng = np.random.default_rng(seed)
    sx, sy = shapes.input_shapes
    if name in ("div", "pow"):
        x, y = rng.uniform(0.5, 2.0, sx), rng.uniform(0.5, 2.0, sy)
    else:  # small integers make ties likely for maximum/minimum
        x, y = rng.integers(-2, 3, sx).astype(np.float64), rng.integers(-2, 3, sy).astype(np.float64)
    g = rng.standard_normal(shapes.result_shape)
    a, b = mg.tensor(x, requires_grad=True), mg.tensor(y, requires_grad=True)
    out = _FNS[name](a, b)
    want, gx, gy = _ref_binary(name, x, y, g)
    assert out.shape == shapes.result_shape
    np.testing.assert_allclose(host(out), want, rtol=1e-12, atol=1e-12)
    out.backward(mg.tensor(g))
    assert a.grad.shape == sx and b.grad.shape == sy
    np.testing.assert_allclose(host(a.grad), gx, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(host(b.grad), gy, rtol=1e-10, atol=1e-10)


_UNARY_REF = {
    "exp": (mg.exp, np.exp, lambda x, g: g * np.exp(x)),
    "log": (mg.log, np.log, lambda x, g: g / x),
    "sqrt": (mg.sqrt, np.sqrt, lambda x, g: g / (2 * np.sqrt(x))),
    "sin": (mg.sin, np.sin, lambda x, g: g * np.cos(x)),
    "cos": (mg.cos, np.cos, lambda x, g: -g * np.sin(x)),
    "neg": (mg.neg, np.negative, lambda x, g: -g),
    "abs": (mg.abs, np.abs, lambda x, g: g * np.sign(x)),
}


@FUZZ
@given(x=hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=4, max_side=4),
                    elements=st.floats(0.05, 10.0)),
       name=st.sampled_from(sorted(_UNARY_REF)), flip=st.booleans())
def test_fuzz_unary_values_and_grads(x, name, flip):
    fn, ref, dref = _UNARY_REF[name]
    if flip and name not in ("log", "sqrt"):
        x = -x
    a = mg.tensor(x, requires_grad=True)
    out = fn(a)
    np.testing.assert_allclose(host(out), ref(x), rtol=1e-12)
    g = np.ones_like(x) * 0.5
    out.backward(mg.tensor(g))
    np.testing.assert_allclose(host(a.grad), dref(x, g), rtol=1e-12)


@FUZZ
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=3, max_side=3),
       seed=st.integers(0, 2 ** 16))
def test_fuzz_where_broadcasts_three_ways(shapes, seed):
    rng = np.random.default_rng(seed)
    sc, sx, sy = shapes.input_shapes
    c, x, y = rng.random(sc) > 0.5, rng.standard_normal(sx), rng.standard_normal(sy)
    a, b = mg.tensor(x, requires_grad=True), mg.tensor(y, requires_grad=True)
    out = mg.where(mg.tensor(c), a, b)
    np.testing.assert_array_equal(host(out), np.where(c, x, y))
    g = rng.standard_normal(shapes.result_shape)
    out.backward(mg.tensor(g))
    np.testing.assert_allclose(host(a.grad), sum_to(np.where(c, g, 0), sx))
    np.testing.assert_allclose(host(b.grad), sum_to(np.where(c, 0, g), sy))


@pytest.mark.parametrize("op", [mg.add, mg.sub, mg.mul, mg.div, mg.pow, mg.maximum, mg.minimum,
                                lambda x, y: mg.where(x > 1.5, x, y)], ids=lambda f: getattr(f, "__name__", "where"))
def test_mixed_float_dtypes_promote_and_grads_keep_input_dtypes(op, device):
    a = mg.tensor([1.0, 2.0], requires_grad=True, device=device)                   # float32
    b = mg.tensor([0.5, 3.0], dtype=mg.float64, requires_grad=True, device=device)  # float64
    out = op(a, b)
    assert out.dtype == mg.float64
    out.sum().backward()
    assert a.grad.dtype == mg.float32 and b.grad.dtype == mg.float64
    a64 = mg.tensor([1.0, 2.0], dtype=mg.float64, requires_grad=True, device=device)
    op(a64, b).sum().backward()
    np.testing.assert_allclose(host(a.grad), host(a64.grad), rtol=1e-6)
