"""max_pool, avg_pool and adaptive_avg_pool2d against loop references (PyTorch's window rules)."""
import itertools
import math

import numpy as np
import pytest

import minigrad as mg
import minigrad.nn.functional as F
from minigrad.autograd import gradcheck
from minigrad.errors import ArgumentError, ShapeError

RNG = np.random.default_rng(2)


def t64(a, device=None, requires_grad=True):
    return mg.tensor(np.asarray(a, dtype=np.float64), requires_grad=requires_grad, device=device)


def out_size(n, k, s, p, d, ceil):
    o = (n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil else 0)) // s + 1
    if ceil and (o - 1) * s >= n + p:
        o -= 1
    return o


def ref_max_pool2d(x, k, s, p, d=(1, 1), ceil=False):
    N, C, H, W = x.shape
    oh, ow = (out_size(n, k[i], s[i], p[i], d[i], ceil) for i, n in enumerate((H, W)))
    out = np.full((N, C, oh, ow), -np.inf)
    idx = np.zeros((N, C, oh, ow), dtype=np.int64)
    for n, c, i, j in itertools.product(range(N), range(C), range(oh), range(ow)):
        for a, b in itertools.product(range(k[0]), range(k[1])):
            r, q = i * s[0] - p[0] + a * d[0], j * s[1] - p[1] + b * d[1]
            if 0 <= r < H and 0 <= q < W and x[n, c, r, q] > out[n, c, i, j]:
                out[n, c, i, j] = x[n, c, r, q]
                idx[n, c, i, j] = r * W + q
    return out, idx


def ref_avg_pool2d(x, k, s, p, ceil=False, count_include_pad=True, divisor_override=None):
    N, C, H, W = x.shape
    oh, ow = (out_size(n, k[i], s[i], p[i], 1, ceil) for i, n in enumerate((H, W)))
    out = np.zeros((N, C, oh, ow))
    for i, j in itertools.product(range(oh), range(ow)):
        h0, w0 = i * s[0] - p[0], j * s[1] - p[1]
        h1, w1 = min(h0 + k[0], H + p[0]), min(w0 + k[1], W + p[1])
        size = (h1 - h0) * (w1 - w0)
        h0, w0, h1, w1 = max(h0, 0), max(w0, 0), min(h1, H), min(w1, W)
        total = x[:, :, h0:h1, w0:w1].sum(axis=(2, 3))
        div = divisor_override or (size if count_include_pad else (h1 - h0) * (w1 - w0))
        out[:, :, i, j] = total / div
    return out


def ref_adaptive(x, oh, ow):
    H, W = x.shape[-2:]
    out = np.zeros(x.shape[:-2] + (oh, ow))
    for i, j in itertools.product(range(oh), range(ow)):
        h0, h1 = (i * H) // oh, math.ceil((i + 1) * H / oh)
        w0, w1 = (j * W) // ow, math.ceil((j + 1) * W / ow)
        out[..., i, j] = x[..., h0:h1, w0:w1].mean(axis=(-2, -1))
    return out


MAX_CASES = [  # (shape, kernel, stride, padding, dilation, ceil_mode)
    ((2, 3, 6, 6), 2, None, 0, 1, False),
    ((1, 2, 7, 7), 3, 2, 1, 1, False),         # overlapping windows + padding
    ((1, 2, 7, 6), (3, 2), (1, 2), (1, 0), 1, False),
    ((2, 1, 8, 8), 2, 1, 0, 2, False),         # dilation, overlapping
    ((1, 2, 5, 5), 2, 2, 0, 1, True),          # ceil_mode
    ((1, 1, 6, 7), 3, 2, 1, 1, True),
    ((2, 3, 7, 7), 2, None, 0, 1, False),      # disjoint windows not covering the last row/column
    ((1, 2, 8, 7), 2, 3, 0, 1, False),         # gaps between windows (stride > kernel)
]


def channels_last(x):
    """Same values, channels innermost in memory (as a conv's output is): differentiable."""
    return x.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)


LAYOUTS = {"channels_first": lambda x: x, "channels_last": channels_last}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", MAX_CASES)
def test_max_pool2d_forward_indices_gradcheck(case, layout, device):
    shape, k, s, p, d, ceil = case
    to = LAYOUTS[layout]
    x = RNG.permutation(np.prod(shape)).reshape(shape).astype(np.float64)  # distinct values: unique argmax
    out, idx = F.max_pool2d(to(t64(x, device)), k, s, p, d, ceil_mode=ceil, return_indices=True)
    kt = k if isinstance(k, tuple) else (k, k)
    st = kt if s is None else (s if isinstance(s, tuple) else (s, s))
    pt = p if isinstance(p, tuple) else (p, p)
    ref, ref_idx = ref_max_pool2d(x, kt, st, pt, (d, d), ceil)
    np.testing.assert_array_equal(out.detach().numpy(), ref)
    assert idx.dtype == mg.int64
    np.testing.assert_array_equal(idx.numpy(), ref_idx)
    assert gradcheck(lambda a: F.max_pool2d(to(a), k, s, p, d, ceil_mode=ceil), (t64(x / 7.0, device),))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("stride", [2, 1])
def test_max_pool2d_ties_send_the_gradient_to_the_first_maximum(layout, stride, device):
    """As PyTorch: in a window of equal values (ReLU zeros, say) only the first one gets the gradient."""
    x = mg.zeros(1, 2, 4, 4, dtype=mg.float64, device=device, requires_grad=True)
    F.max_pool2d(LAYOUTS[layout](x), 2, stride=stride).sum().backward()
    expected = np.zeros((4, 4))
    for i in range(0, 3, stride):
        for j in range(0, 3, stride):
            expected[i, j] += 1
    np.testing.assert_array_equal(x.grad.numpy()[0, 1], expected)
    y = mg.tensor([[[[1.0, np.nan], [np.nan, 3.0]]]], device=device, requires_grad=True)
    out = F.max_pool2d(y, 2)
    assert np.isnan(out.item())
    out.sum().backward()
    np.testing.assert_array_equal(y.grad.numpy()[0, 0], [[0.0, 1.0], [0.0, 0.0]])


def test_max_pool2d_overlapping_gradient_accumulates(device):
    x = t64(np.array([[[[0.0, 1, 0], [0, 9, 0], [0, 0, 0]]]]), device)
    F.max_pool2d(x, 2, stride=1).sum().backward()   # the 9 is the max of all four windows
    np.testing.assert_array_equal(x.grad.numpy()[0, 0], [[0, 0, 0], [0, 4, 0], [0, 0, 0]])


AVG_CASES = [  # (shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
    ((2, 3, 6, 6), 2, None, 0, False, True, None),
    ((1, 2, 7, 7), 3, 2, 1, False, True, None),
    ((1, 2, 7, 7), 3, 2, 1, False, False, None),
    ((1, 2, 6, 5), (3, 2), 1, (1, 1), False, True, None),   # overlapping
    ((1, 2, 5, 5), 2, 2, 0, True, True, None),
    ((1, 1, 6, 7), 3, 2, 1, True, False, None),
    ((1, 1, 6, 7), 3, 2, 1, True, True, None),
    ((1, 2, 5, 5), 3, 1, 1, False, True, 4),
    ((1, 2, 8, 7), 2, 3, 0, False, True, None),     # gaps between windows
]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", AVG_CASES)
def test_avg_pool2d_forward_and_gradcheck(case, layout, device):
    shape, k, s, p, ceil, cip, div = case
    to = LAYOUTS[layout]
    x = RNG.standard_normal(shape)
    out = F.avg_pool2d(to(t64(x, device)), k, s, p, ceil, cip, div)
    kt = k if isinstance(k, tuple) else (k, k)
    st = kt if s is None else (s if isinstance(s, tuple) else (s, s))
    pt = p if isinstance(p, tuple) else (p, p)
    np.testing.assert_allclose(out.detach().numpy(), ref_avg_pool2d(x, kt, st, pt, ceil, cip, div), rtol=1e-12)
    assert gradcheck(lambda a: F.avg_pool2d(to(a), k, s, p, ceil, cip, div), (t64(x, device),))


@pytest.mark.parametrize("fn", ["max", "avg"])
def test_pool1d(fn, device):
    x = RNG.standard_normal((2, 3, 9))
    if fn == "max":
        out = F.max_pool1d(t64(x, device), 3, 2, 1)
        ref = ref_max_pool2d(x[:, :, None], (1, 3), (1, 2), (0, 1))[0][:, :, 0]
        assert gradcheck(lambda a: F.max_pool1d(a, 3, 2, 1), (t64(x, device),))
    else:
        out = F.avg_pool1d(t64(x, device), 3, 2, 1)
        ref = ref_avg_pool2d(x[:, :, None], (1, 3), (1, 2), (0, 1))[:, :, 0]
        assert gradcheck(lambda a: F.avg_pool1d(a, 3, 2, 1), (t64(x, device),))
    np.testing.assert_allclose(out.detach().numpy(), ref, rtol=1e-12)


@pytest.mark.parametrize("in_hw,out_hw", [((6, 8), (3, 4)), ((6, 8), 1), ((7, 5), (3, 2)), ((5, 5), (5, 5)),
                                          ((4, 6), (None, 4)), ((3, 3), (5, 4))])
def test_adaptive_avg_pool2d(in_hw, out_hw, device):
    x = RNG.standard_normal((2, 3) + in_hw)
    out = F.adaptive_avg_pool2d(t64(x, device), out_hw)
    oh, ow = out_hw if isinstance(out_hw, tuple) else (out_hw, out_hw)
    oh, ow = oh or in_hw[0], ow or in_hw[1]
    np.testing.assert_allclose(out.detach().numpy(), ref_adaptive(x, oh, ow), rtol=1e-12, atol=1e-14)
    assert gradcheck(lambda a: F.adaptive_avg_pool2d(a, out_hw), (t64(x[:1, :2], device),))


def test_pools_unbatched_and_float32(device):
    x = mg.tensor(RNG.standard_normal((3, 6, 6)).astype(np.float32), requires_grad=True, device=device)
    for fn in (lambda a: F.max_pool2d(a, 3, 2, 1), lambda a: F.avg_pool2d(a, 2),
               lambda a: F.adaptive_avg_pool2d(a, (2, 3))):
        x.grad = None
        y = fn(x)
        assert y.ndim == 3 and y.dtype == mg.float32
        y.sum().backward()
        assert x.grad.dtype == mg.float32 and x.grad.shape == (3, 6, 6)
    np.testing.assert_allclose(F.avg_pool2d(x, 2).detach().numpy(),
                               ref_avg_pool2d(x.detach().numpy()[None].astype(np.float64), (2, 2), (2, 2),
                                              (0, 0))[0], rtol=1e-6, atol=1e-6)


def test_max_pool_padding_is_minus_infinity(device):
    x = mg.tensor(-np.ones((1, 1, 2, 2)), device=device)
    np.testing.assert_array_equal(F.max_pool2d(x, 2, 1, 1).numpy(), -np.ones((1, 1, 3, 3)))


def test_pool_misuse():
    with pytest.raises(ArgumentError, match="max_pool2d: padding 2 should be at most half of the effective kernel size 3"):
        F.max_pool2d(mg.randn(1, 1, 5, 5), 3, padding=2)
    with pytest.raises(ShapeError, match=r"avg_pool2d: input spatial size \(2, 2\)"):
        F.avg_pool2d(mg.randn(1, 1, 2, 2), 3)
    with pytest.raises(ShapeError, match="max_pool2d: expected a 4-D"):
        F.max_pool2d(mg.randn(5, 5), 2)
    with pytest.raises(ArgumentError, match="adaptive_avg_pool2d: output_size"):
        F.adaptive_avg_pool2d(mg.randn(1, 1, 4, 4), 0)
    with pytest.raises(ArgumentError, match="max_pool2d: kernel_size"):
        F.max_pool2d(mg.randn(1, 1, 4, 4), (2, 2, 2))
