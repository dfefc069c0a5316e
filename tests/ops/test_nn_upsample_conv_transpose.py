"""F.conv_transpose2d / nn.ConvTranspose2d (against a loop that scatters each input pixel times the kernel) and
F.interpolate / nn.Upsample (against values derived by hand and PyTorch's coordinate rules); float64
gradchecks, errors."""
import numpy as np
import pytest

import minigrad as mg
import minigrad.nn as nn
import minigrad.nn.functional as F
from minigrad.autograd import gradcheck, gradgradcheck
from minigrad.errors import ArgumentError, ShapeError

R = np.random.default_rng(3)


def T(*shape):
    return mg.tensor(R.standard_normal(shape), dtype=mg.float64, requires_grad=True)


def _conv_transpose_ref(x, w, b, s, p, op, g, d):
    N, C, H, W = x.shape
    _, Og, kh, kw = w.shape
    Ho = (H - 1) * s[0] - 2 * p[0] + d[0] * (kh - 1) + op[0] + 1
    Wo = (W - 1) * s[1] - 2 * p[1] + d[1] * (kw - 1) + op[1] + 1
    full = np.zeros((N, Og * g, Ho + 2 * p[0], Wo + 2 * p[1]))
    Cg = C // g
    for n, c, i, j, a, e in np.ndindex(N, C, H, W, kh, kw):
        gi = c // Cg
        full[n, gi * Og:(gi + 1) * Og, i * s[0] + a * d[0], j * s[1] + e * d[1]] += x[n, c, i, j] * w[c, :, a, e]
    out = full[:, :, p[0]:p[0] + Ho, p[1]:p[1] + Wo]
    return out if b is None else out + b[None, :, None, None]


GEOMETRIES = [((1, 1), (0, 0), (0, 0), 1, (1, 1)), ((2, 2), (1, 1), (1, 1), 1, (1, 1)),
              ((2, 1), (0, 1), (1, 0), 2, (1, 2)), ((3, 2), (2, 0), (2, 1), 1, (2, 1))]


@pytest.mark.parametrize("s, p, op, g, d", GEOMETRIES)
def test_conv_transpose2d_values_and_gradients(s, p, op, g, d):
    x, w, b = T(2, 4, 3, 3), T(4, 3, 3, 2), T(3 * g)
    got = F.conv_transpose2d(x, w, b, s, p, op, g, d).detach().numpy()
    ref = _conv_transpose_ref(x.detach().numpy(), w.detach().numpy(), b.detach().numpy(), s, p, op, g, d)
    np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-12)
    assert gradcheck(lambda x_, w_, b_: F.conv_transpose2d(x_, w_, b_, s, p, op, g, d),
                     [T(1, 4, 2, 3), T(4, 3, 2, 2), T(3 * g)])


def test_conv_transpose2d_second_order_unbatched_and_no_bias():
    assert gradgradcheck(lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1) ** 2, [T(1, 2, 2, 2), T(2, 2, 2, 2)])
    x, w = T(4, 3, 3), T(4, 2, 2, 2)
    out = F.conv_transpose2d(x, w, stride=2)
    assert out.shape == (2, 6, 6)
    np.testing.assert_allclose(out.detach().numpy(), F.conv_transpose2d(x.unsqueeze(0), w, stride=2)[0].detach().numpy())


def test_conv_transpose2d_is_conv2ds_input_gradient():
    x, w = T(1, 3, 6, 6), T(4, 3, 3, 3)
    y = F.conv2d(x, w, stride=2, padding=1)
    g = mg.tensor(R.standard_normal(y.shape))
    dx, = mg.autograd.grad(y, x, g)
    np.testing.assert_allclose(F.conv_transpose2d(g, w, stride=2, padding=1, output_padding=1).detach().numpy(),
                               dx.numpy(), rtol=1e-12)


def test_conv_transpose2d_errors():
    x, w = mg.randn(1, 4, 3, 3), mg.randn(4, 2, 3, 3)
    with pytest.raises(ShapeError, match="conv_transpose2d: input has 3 channels"):
        F.conv_transpose2d(mg.randn(1, 3, 3, 3), w)
    with pytest.raises(ArgumentError, match="output_padding"):
        F.conv_transpose2d(x, w, stride=2, output_padding=2)
    with pytest.raises(ShapeError, match="bias shape"):
        F.conv_transpose2d(x, w, mg.randn(3))
    with pytest.raises(ShapeError, match="weight must be 4-D"):
        F.conv_transpose2d(x, mg.randn(4, 2, 3))
    with pytest.raises(ShapeError, match="not positive"):
        F.conv_transpose2d(mg.randn(1, 4, 1, 1), w, padding=3)


def test_conv_transpose2d_module():
    m = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2)
    assert m.weight.shape == (4, 3, 3, 3) and m.bias.shape == (6,)
    assert float(m.weight.abs().max()) <= 1 / np.sqrt(3 * 9) + 1e-6     # kaiming_uniform(a=sqrt(5)), fan_in 27
    x = mg.randn(2, 4, 5, 5)
    assert m(x).shape == (2, 6, 10, 10) and m(x, output_size=(9, 9)).shape == (2, 6, 9, 9)
    assert "output_padding=(1, 1)" in repr(m) and "groups=2" in repr(m)
    m(x).sum().backward()
    assert m.weight.grad.shape == m.weight.shape and m.bias.grad is not None
    with pytest.raises(ArgumentError, match="divisible by groups"):
        nn.ConvTranspose2d(3, 4, 3, groups=2)


def test_interpolate_nearest_matches_pytorchs_index_rule():
    x = mg.arange(6.0).reshape(1, 1, 2, 3)
    assert F.interpolate(x, scale_factor=2).numpy()[0, 0].tolist() == \
        [[0, 0, 1, 1, 2, 2], [0, 0, 1, 1, 2, 2], [3, 3, 4, 4, 5, 5], [3, 3, 4, 4, 5, 5]]
    # size 3 -> 5: src = floor(dst * 3/5) = 0 0 1 1 2; nearest-exact: floor((dst + .5) * 3/5) = 0 0 1 2 2
    line = mg.tensor([[[10.0, 20.0, 30.0]]])
    assert F.interpolate(line, size=5).tolist() == [[[10, 10, 20, 20, 30]]]
    assert F.interpolate(line, size=5, mode="nearest-exact").tolist() == [[[10, 10, 20, 30, 30]]]
    assert F.interpolate(x, size=(1, 2)).numpy()[0, 0].tolist() == [[0, 1]]     # downsampling: floor(dst * 3/2)


def test_interpolate_linear_values():
    line = mg.tensor([[[1.0, 2.0]]])
    assert F.interpolate(line, scale_factor=2, mode="linear").tolist() == [[[1.0, 1.25, 1.75, 2.0]]]
    np.testing.assert_allclose(F.interpolate(line, scale_factor=2, mode="linear", align_corners=True).numpy(),
                               [[[1, 4 / 3, 5 / 3, 2]]], rtol=1e-6)
    img = mg.tensor([[[[0.0, 1.0], [2.0, 3.0]]]])
    up = F.interpolate(img, size=(3, 3), mode="bilinear", align_corners=True).numpy()[0, 0]
    np.testing.assert_allclose(up, [[0, 0.5, 1], [1, 1.5, 2], [2, 2.5, 3]])
    # align_corners=False, 2 -> 4: sources (dst + .5) / 2 - .5 = -.25 (clamped to 0), .25, .75, 1.25
    up = F.interpolate(img, scale_factor=2, mode="bilinear").numpy()[0, 0]
    np.testing.assert_allclose(up[0], [0, 0.25, 0.75, 1])
    np.testing.assert_allclose(up[:, 0], [0, 0.5, 1.5, 2])


@pytest.mark.parametrize("kwargs", [dict(size=(5, 7), mode="bilinear"), dict(size=(5, 7), mode="bilinear", align_corners=True),
                                    dict(scale_factor=1.5, mode="nearest"), dict(scale_factor=(0.5, 2), mode="bilinear"),
                                    dict(size=(2, 2), mode="area")])
def test_interpolate_gradients(kwargs):
    assert gradcheck(lambda t: F.interpolate(t, **kwargs), [T(1, 2, 3, 4)])


def test_interpolate_1d_gradients_and_errors():
    assert gradcheck(lambda t: F.interpolate(t, size=6, mode="linear", align_corners=True), [T(2, 2, 4)])
    x = mg.randn(1, 1, 4, 4)
    with pytest.raises(ArgumentError, match="exactly one of size and scale_factor"):
        F.interpolate(x)
    with pytest.raises(ArgumentError, match="mode 'bicubic' is not supported"):
        F.interpolate(x, scale_factor=2, mode="bicubic")
    with pytest.raises(ArgumentError, match="mode 'linear' is not supported for a 4-D"):
        F.interpolate(x, scale_factor=2, mode="linear")
    with pytest.raises(ArgumentError, match="align_corners can only be set"):
        F.interpolate(x, scale_factor=2, align_corners=True)
    with pytest.raises(ShapeError, match="3-D .* and 4-D"):
        F.interpolate(mg.randn(4, 4), scale_factor=2)


def test_upsample_modules():
    x = mg.randn(1, 2, 3, 3)
    up = nn.Upsample(scale_factor=2, mode="bilinear")
    np.testing.assert_allclose(up(x).numpy(), F.interpolate(x, scale_factor=2.0, mode="bilinear").numpy())
    assert repr(up) == "Upsample(scale_factor=2.0, mode='bilinear')"
    np.testing.assert_allclose(nn.UpsamplingBilinear2d(size=(4, 5))(x).numpy(),
                               F.interpolate(x, size=(4, 5), mode="bilinear", align_corners=True).numpy())
    assert nn.UpsamplingNearest2d(scale_factor=3)(x).shape == (1, 2, 9, 9)
