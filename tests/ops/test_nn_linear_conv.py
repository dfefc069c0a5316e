"""linear, conv1d and conv2d against loop-based NumPy references; gradchecks over stride/padding/dilation/groups."""
import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import minigrad as mg
import minigrad.nn.functional as F
from minigrad.autograd import gradcheck
from minigrad.errors import ArgumentError, DTypeError, ShapeError

RNG = np.random.default_rng(1)


def arr(*shape):
    return RNG.standard_normal(shape)


def t64(a, device=None, requires_grad=True):
    return mg.tensor(np.asarray(a, dtype=np.float64), requires_grad=requires_grad, device=device)


# --- linear ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("lead", [(), (5,), (2, 3)])
def test_linear_forward(lead, device):
    x, w, b = arr(*lead, 4), arr(3, 4), arr(3)
    out = F.linear(t64(x, device), t64(w, device), t64(b, device))
    assert out.device == device
    np.testing.assert_allclose(out.detach().numpy(), x @ w.T + b, rtol=1e-12)
    np.testing.assert_allclose(F.linear(t64(x, device), t64(w, device)).detach().numpy(), x @ w.T, rtol=1e-12)


@pytest.mark.parametrize("lead", [(), (5,), (2, 3)])
def test_linear_gradcheck(lead, device):
    assert gradcheck(F.linear, (t64(arr(*lead, 4), device), t64(arr(3, 4), device), t64(arr(3), device)))
    assert gradcheck(lambda x, w: F.linear(x, w), (t64(arr(*lead, 4), device), t64(arr(3, 4), device)))


def test_linear_float32_and_grad_values(device):
    x = mg.tensor(arr(6, 4).astype(np.float32), requires_grad=True, device=device)
    w = mg.tensor(arr(3, 4).astype(np.float32), requires_grad=True, device=device)
    b = mg.tensor(arr(3).astype(np.float32), requires_grad=True, device=device)
    y = F.linear(x, w, b)
    g = arr(6, 3).astype(np.float32)
    y.backward(mg.tensor(g, device=device))
    assert y.dtype == x.grad.dtype == w.grad.dtype == b.grad.dtype == mg.float32
    np.testing.assert_allclose(x.grad.numpy(), g @ w.detach().numpy(), rtol=1e-5)
    np.testing.assert_allclose(w.grad.numpy(), g.T @ x.detach().numpy(), rtol=1e-5)
    np.testing.assert_allclose(b.grad.numpy(), g.sum(0), rtol=1e-5)


def test_linear_feature_mismatch():
    with pytest.raises(ShapeError, match=r"linear: .*\(2, 5\).*expects 4"):
        F.linear(mg.randn(2, 5), mg.randn(3, 4))
    with pytest.raises(ShapeError, match="linear: bias"):
        F.linear(mg.randn(2, 4), mg.randn(3, 4), mg.randn(2))
    with pytest.raises(DTypeError, match="linear"):
        F.linear(mg.randn(2, 4), mg.randn(3, 4, dtype=mg.float64))


# --- convolution reference ------------------------------------------------------------------------
def ref_conv(x, w, b, stride, pads, dilation, groups):
    """Direct definition: out[n, o, p] = b[o] + sum_{c in group, k} w[o, c, k] * xpad[n, c, p*s + k*d]."""
    nd = x.ndim - 2
    xp = np.pad(x, ((0, 0), (0, 0)) + tuple(pads))
    N, C = x.shape[:2]
    O, Cg = w.shape[:2]
    kernel = w.shape[2:]
    out_sz = tuple((xp.shape[2 + i] - dilation[i] * (kernel[i] - 1) - 1) // stride[i] + 1 for i in range(nd))
    out = np.zeros((N, O) + out_sz)
    Og = O // groups
    for n, o in itertools.product(range(N), range(O)):
        g = o // Og
        for pos in itertools.product(*(range(s) for s in out_sz)):
            acc = 0.0 if b is None else b[o]
            for c in range(Cg):
                for k in itertools.product(*(range(kk) for kk in kernel)):
                    idx = tuple(pos[i] * stride[i] + k[i] * dilation[i] for i in range(nd))
                    acc += w[(o, c) + k] * xp[(n, g * Cg + c) + idx]
            out[(n, o) + pos] = acc
    return out


CONV2D_CASES = [  # (N, C, H, W, O, kh, kw, stride, padding, dilation, groups)
    (2, 3, 5, 5, 4, 3, 3, 1, 0, 1, 1),
    (1, 2, 6, 5, 3, 3, 2, 2, 1, 1, 1),
    (2, 4, 7, 7, 4, 3, 3, 1, 2, 2, 2),
    (1, 4, 6, 6, 6, 2, 2, (2, 1), (1, 0), 1, 2),
    (1, 3, 5, 6, 3, 3, 3, 1, "same", 1, 3),           # depthwise
    (1, 2, 6, 6, 2, 2, 4, 1, "same", (1, 2), 1),       # even kernel: asymmetric 'same'
    (2, 2, 4, 4, 3, 1, 1, 1, "valid", 1, 1),          # 1x1
    (1, 2, 8, 7, 2, 3, 2, 3, (0, 2), (2, 1), 1),
]


def channels_last(x):
    """The same values with channels innermost in memory (what a previous conv returns): differentiable."""
    perm = (0,) + tuple(range(2, x.ndim)) + (1,)
    back = (0, x.ndim - 1) + tuple(range(1, x.ndim - 1))
    y = x.permute(*perm).contiguous().permute(*back)
    assert x.shape[1] == 1 or y.array.strides[1] == y.array.itemsize
    return y


LAYOUTS = {"channels_first": lambda x: x, "channels_last": channels_last}


def _pads(padding, kernel, dilation, nd):
    if padding == "same":
        return tuple((d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2) for k, d in zip(kernel, dilation))
    if padding == "valid":
        return ((0, 0),) * nd
    padding = padding if isinstance(padding, tuple) else (padding,) * nd
    return tuple((p, p) for p in padding)


def _tup(v, nd):
    return v if isinstance(v, tuple) else (v,) * nd


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", CONV2D_CASES)
def test_conv2d_forward_matches_reference(case, layout, device):
    N, C, H, W, O, kh, kw, stride, padding, dilation, groups = case
    x, w, b = arr(N, C, H, W), arr(O, C // groups, kh, kw), arr(O)
    out = F.conv2d(LAYOUTS[layout](t64(x, device)), t64(w, device), t64(b, device), stride=stride, padding=padding,
                   dilation=dilation, groups=groups)
    assert out.device == device
    ref = ref_conv(x, w, b, _tup(stride, 2), _pads(padding, (kh, kw), _tup(dilation, 2), 2),
                   _tup(dilation, 2), groups)
    assert out.shape == ref.shape
    np.testing.assert_allclose(out.detach().numpy(), ref, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", CONV2D_CASES)
def test_conv2d_gradcheck(case, layout, device):
    N, C, H, W, O, kh, kw, stride, padding, dilation, groups = case
    x, w, b = t64(arr(N, C, H, W), device), t64(arr(O, C // groups, kh, kw), device), t64(arr(O), device)
    to = LAYOUTS[layout]
    assert gradcheck(lambda x, w, b: F.conv2d(to(x), w, b, stride, padding, dilation, groups), (x, w, b))


def test_conv2d_output_is_channels_last_view_and_chains(device):
    """conv returns channels-last memory viewed as (N, O, H, W); a second conv reads it as such (the
    'kc' im2col order) and the whole chain matches the reference and passes gradcheck."""
    x, w1, w2 = arr(2, 3, 6, 6), arr(4, 3, 3, 3), arr(2, 2, 2, 2)
    y = F.conv2d(t64(x, device, False), t64(w1, device, False), padding=1)
    assert y.shape == (2, 4, 6, 6) and y.array.strides[1] == y.array.itemsize
    ref1 = ref_conv(x, w1, None, (1, 1), ((1, 1), (1, 1)), (1, 1), 1)
    np.testing.assert_allclose(y.numpy(), ref1, rtol=1e-10, atol=1e-12)
    z = F.conv2d(y, t64(w2, device, False), stride=2, groups=2)
    np.testing.assert_allclose(z.numpy(), ref_conv(ref1, w2, None, (2, 2), ((0, 0), (0, 0)), (1, 1), 2),
                               rtol=1e-10, atol=1e-12)
    assert z.reshape(2, -1).shape == (2, 2 * 3 * 3) and z.view(2, -1).shape == (2, 18)
    assert gradcheck(lambda x, a, b: F.conv2d(F.relu(F.conv2d(x, a, padding=1)), b, stride=2, groups=2),
                     (t64(x, device), t64(w1, device), t64(w2, device)))


CONV1D_CASES = [  # (N, C, L, O, k, stride, padding, dilation, groups)
    (2, 3, 7, 4, 3, 1, 0, 1, 1),
    (1, 4, 9, 2, 3, 2, 1, 2, 2),
    (2, 2, 6, 4, 4, 1, "same", 1, 2),
    (1, 3, 5, 3, 1, 3, 0, 1, 3),
]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", CONV1D_CASES)
def test_conv1d_forward_and_gradcheck(case, layout, device):
    N, C, L, O, k, stride, padding, dilation, groups = case
    x, w, b = arr(N, C, L), arr(O, C // groups, k), arr(O)
    to = LAYOUTS[layout]
    out = F.conv1d(to(t64(x, device)), t64(w, device), t64(b, device), stride, padding, dilation, groups)
    ref = ref_conv(x, w, b, (stride,), _pads(padding, (k,), (dilation,), 1), (dilation,), groups)
    np.testing.assert_allclose(out.detach().numpy(), ref, rtol=1e-10, atol=1e-12)
    assert gradcheck(lambda x, w, b: F.conv1d(to(x), w, b, stride, padding, dilation, groups),
                     (t64(x, device), t64(w, device), t64(b, device)))


def test_conv2d_without_bias_and_unbatched(device):
    x, w = arr(3, 5, 5), arr(2, 3, 3, 3)
    out = F.conv2d(t64(x, device), t64(w, device), padding=1)
    assert out.shape == (2, 5, 5)
    np.testing.assert_allclose(out.detach().numpy(), ref_conv(x[None], w, None, (1, 1), ((1, 1), (1, 1)),
                                                              (1, 1), 1)[0], rtol=1e-10)
    assert gradcheck(lambda x, w: F.conv2d(x, w, padding=1), (t64(x, device), t64(w, device)))


def test_conv2d_float32_preserved(device):
    x = mg.tensor(arr(2, 4, 6, 6).astype(np.float32), requires_grad=True, device=device)
    w = mg.tensor(arr(6, 2, 3, 3).astype(np.float32), requires_grad=True, device=device)
    b = mg.tensor(arr(6).astype(np.float32), requires_grad=True, device=device)
    y = F.conv2d(x, w, b, stride=2, padding=1, groups=2)
    assert y.dtype == mg.float32
    y.sum().backward()
    assert x.grad.dtype == w.grad.dtype == b.grad.dtype == mg.float32
    ref = ref_conv(x.detach().numpy().astype(np.float64), w.detach().numpy().astype(np.float64),
                   b.detach().numpy().astype(np.float64), (2, 2), ((1, 1), (1, 1)), (1, 1), 2)
    np.testing.assert_allclose(y.detach().numpy(), ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(b.grad.numpy(), np.full(6, 18.0))  # 3x3 output positions x 2 samples


def test_conv2d_bias_grad_counts_positions(device):
    x = mg.randn(2, 1, 6, 6, device=device)
    w = mg.randn(3, 1, 3, 3, device=device)
    b = mg.zeros(3, requires_grad=True, device=device)
    F.conv2d(x, w, b, stride=2, padding=1).sum().backward()
    np.testing.assert_allclose(b.grad.numpy(), np.full(3, 2 * 3 * 3))


# --- conv misuse ----------------------------------------------------------------------------------
def test_conv2d_wrong_channel_count():
    with pytest.raises(ShapeError, match=r"conv2d: input has 3 channels but weight expects 4 \(weight shape "
                                         r"\(8, 4, 3, 3\), groups=1\)"):
        F.conv2d(mg.randn(1, 3, 8, 8), mg.randn(8, 4, 3, 3))


def test_conv_input_too_small():
    with pytest.raises(ShapeError, match=r"conv2d: input spatial size \(2, 2\)"):
        F.conv2d(mg.randn(1, 1, 2, 2), mg.randn(1, 1, 3, 3))
    with pytest.raises(ShapeError, match="conv1d"):
        F.conv1d(mg.randn(1, 1, 4), mg.randn(1, 1, 3), dilation=2)


def test_conv_bad_groups():
    with pytest.raises(ArgumentError, match="conv2d: out_channels=5 .* not divisible by groups=2"):
        F.conv2d(mg.randn(1, 4, 5, 5), mg.randn(5, 2, 3, 3), groups=2)
    with pytest.raises(ArgumentError, match="conv2d: groups"):
        F.conv2d(mg.randn(1, 4, 5, 5), mg.randn(4, 4, 3, 3), groups=0)
    with pytest.raises(ShapeError, match="conv2d: input has 4 channels but weight expects 6"):
        F.conv2d(mg.randn(1, 4, 5, 5), mg.randn(6, 2, 3, 3), groups=3)


def test_conv_bad_arguments():
    with pytest.raises(ArgumentError, match="conv2d: padding='same' is not supported for strided"):
        F.conv2d(mg.randn(1, 1, 5, 5), mg.randn(1, 1, 3, 3), stride=2, padding="same")
    with pytest.raises(ArgumentError, match="conv2d: stride"):
        F.conv2d(mg.randn(1, 1, 5, 5), mg.randn(1, 1, 3, 3), stride=0)
    with pytest.raises(ShapeError, match="conv2d: weight must be 4-D"):
        F.conv2d(mg.randn(1, 1, 5, 5), mg.randn(1, 3, 3))
    with pytest.raises(ShapeError, match="conv1d: bias shape"):
        F.conv1d(mg.randn(1, 1, 5), mg.randn(2, 1, 3), mg.randn(3))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_conv2d_geometry_fuzz(device, data):
    """Random stride/padding/dilation/groups/kernel: shape and values match the direct definition."""
    groups = data.draw(st.integers(1, 3))
    cg, og = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2))
    kh, kw = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    stride = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)))
    dilation = (data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2)))
    padding = (data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2)))
    H = data.draw(st.integers(max(1, dilation[0] * (kh - 1) + 1 - 2 * padding[0]), 7))
    W = data.draw(st.integers(max(1, dilation[1] * (kw - 1) + 1 - 2 * padding[1]), 7))
    x, w, b = arr(2, cg * groups, H, W), arr(og * groups, cg, kh, kw), arr(og * groups)
    to = LAYOUTS[data.draw(st.sampled_from(sorted(LAYOUTS)))]
    out = F.conv2d(to(t64(x, device, False)), t64(w, device, False), t64(b, device, False), stride, padding, dilation,
                   groups)
    ref = ref_conv(x, w, b, stride, tuple((p, p) for p in padding), dilation, groups)
    assert out.shape == ref.shape
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-10, atol=1e-12)
