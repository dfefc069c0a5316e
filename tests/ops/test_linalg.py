"""matmul in every shape combination: values vs NumPy, float64 gradchecks, reference gradients."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import minigrad as mg
from minigrad.autograd import gradcheck
from minigrad.errors import ShapeError


def T(arr, device, grad=True, dtype=np.float64):
    return mg.tensor(np.asarray(arr, dtype=dtype), device=device, requires_grad=grad)


def host(t):
    return t.detach().cpu().numpy()


SHAPES = [((4,), (4,)), ((4,), (4, 3)), ((3, 4), (4,)), ((3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5)),
          ((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 2)), ((2, 3, 4), (4,)),
          ((4,), (2, 4, 3)), ((1, 3, 4), (2, 4, 2)), ((1, 4), (4, 1))]


@pytest.mark.parametrize("sa,sb", SHAPES, ids=str)
def test_matmul_values_and_gradcheck(sa, sb, device):
    rng = np.random.default_rng(0)
    a_np, b_np = rng.standard_normal(sa), rng.standard_normal(sb)
    a, b = T(a_np, device), T(b_np, device)
    out = a @ b
    want = a_np @ b_np
    assert out.shape == want.shape
    np.testing.assert_allclose(host(out), want, rtol=1e-12, atol=1e-12)
    assert gradcheck(mg.matmul, (a, b))


@pytest.mark.parametrize("sa,sb", SHAPES, ids=str)
@pytest.mark.parametrize("which", ["a", "b"])
def test_matmul_gradcheck_one_side(sa, sb, which, device):
    rng = np.random.default_rng(1)
    a = T(rng.standard_normal(sa), device, grad=which == "a")
    b = T(rng.standard_normal(sb), device, grad=which == "b")
    assert gradcheck(lambda x, y: x.matmul(y), (a, b))
    assert (a.grad, b.grad) == (None, None)


def _ref_grads(a, b, g):
    """Reference matmul gradients, by promoting vectors and summing broadcast batch dims in NumPy."""
    if a.ndim == b.ndim == 1:
        return g * b, g * a
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    g2 = g
    if a.ndim == 1:
        g2 = np.expand_dims(g2, -2)
    if b.ndim == 1:
        g2 = np.expand_dims(g2, -1)
    ga = g2 @ np.swapaxes(b2, -1, -2)
    gb = np.swapaxes(a2, -1, -2) @ g2

    def reduce_to(x, shape):
        while x.ndim > len(shape):
            x = x.sum(0)
        for i, n in enumerate(shape):
            if n == 1 and x.shape[i] != 1:
                x = x.sum(i, keepdims=True)
        return x
    ga = reduce_to(ga, a2.shape).reshape(a.shape)
    gb = reduce_to(gb, b2.shape).reshape(b.shape)
    return ga, gb


@pytest.mark.parametrize("sa,sb", SHAPES, ids=str)
def test_matmul_grads_match_reference(sa, sb, device):
    rng = np.random.default_rng(2)
    a_np, b_np = rng.standard_normal(sa), rng.standard_normal(sb)
    g = rng.standard_normal(np.shape(a_np @ b_np))
    a, b = T(a_np, device), T(b_np, device)
    (a @ b).backward(mg.tensor(g, device=device))
    ga, gb = _ref_grads(a_np, b_np, g)
    np.testing.assert_allclose(host(a.grad), ga, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(host(b.grad), gb, rtol=1e-10, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(batch=st.lists(st.integers(1, 3), min_size=0, max_size=2), batch_b=st.lists(st.integers(1, 3), max_size=2),
       n=st.integers(1, 3), k=st.integers(1, 3), m=st.integers(1, 3),
       a_vec=st.booleans(), b_vec=st.booleans(), ones=st.integers(0, 3), seed=st.integers(0, 1000))
def test_fuzz_matmul_broadcast(batch, batch_b, n, k, m, a_vec, b_vec, ones, seed):
    # make the batch shapes mutually broadcastable by setting some entries to 1
    L = min(len(batch), len(batch_b))
    batch_b = list(batch_b)
    for i in range(1, L + 1):
        if batch[-i] != batch_b[-i]:
            if (ones + i) % 2:
                batch[-i] = 1
            else:
                batch_b[-i] = 1
    sa = (k,) if a_vec else tuple(batch) + (n, k)
    sb = (k,) if b_vec else tuple(batch_b) + (k, m)
    rng = np.random.default_rng(seed)
    a_np, b_np = rng.standard_normal(sa), rng.standard_normal(sb)
    want = a_np @ b_np
    a, b = mg.tensor(a_np, requires_grad=True), mg.tensor(b_np, requires_grad=True)
    out = a @ b
    np.testing.assert_allclose(host(out), want, rtol=1e-12, atol=1e-12)
    g = rng.standard_normal(np.shape(want))
    out.backward(mg.tensor(g))
    ga, gb = _ref_grads(a_np, b_np, g)
    np.testing.assert_allclose(host(a.grad), ga, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(host(b.grad), gb, rtol=1e-10, atol=1e-12)


def test_mm_bmm(device):
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 4, 5))
    np.testing.assert_allclose(host(mg.bmm(T(a, device), T(b, device))), a @ b)
    np.testing.assert_allclose(host(T(a[0], device).mm(T(b[0], device))), a[0] @ b[0])
    with pytest.raises(ShapeError, match="bmm"):
        mg.bmm(T(a[0], device), T(b[0], device))
    with pytest.raises(ShapeError, match="mm"):
        mg.mm(T(a, device), T(b, device))


def test_matmul_float32_keeps_dtype(device):
    a = mg.randn(3, 4, device=device, requires_grad=True)
    b = mg.randn(4, device=device, requires_grad=True)
    out = a @ b
    assert out.dtype == mg.float32
    out.sum().backward()
    assert a.grad.dtype == b.grad.dtype == mg.float32


@pytest.mark.parametrize("sa,sb", [((3, 4), (5, 6)), ((4,), (3,)), ((2, 3, 4), (3, 4, 5)), ((3, 4), (2, 5, 6)),
                                   ((), (3,))], ids=str)
def test_matmul_shape_errors_name_op_and_shapes(sa, sb, device):
    a, b = mg.zeros(*sa, device=device), mg.zeros(*sb, device=device)
    with pytest.raises(ShapeError) as info:
        a @ b
    msg = str(info.value)
    assert msg.startswith("matmul:")
    assert str(tuple(sa)) in msg and str(tuple(sb)) in msg
