"""Tiled (flash) attention against the naive scaled_dot_product_attention: values, gradients, masks,
float64 gradcheck, selection by F.scaled_dot_product_attention, errors, and O(L) memory."""
import tracemalloc

import numpy as np
import pytest

import minigrad as mg
import minigrad.nn.functional as F
from minigrad.autograd import gradcheck
from minigrad.errors import ArgumentError, DTypeError, ShapeError
from minigrad.ops.nn import attention
from minigrad.ops.nn.flash_attention import FlashAttention, flash_attention

RNG = np.random.default_rng(0)


def T(*shape, grad=True):
    return mg.tensor(RNG.standard_normal(shape), dtype=mg.float64, requires_grad=grad)


def _both(q, k, v, block, **kw):
    """(output, grads) of the naive and the flash path, for a loss that weights every output element."""
    res = []
    for fn in (lambda: F.scaled_dot_product_attention(q, k, v, use_flash=False, **kw),
               lambda: flash_attention(q, k, v, block_size=block, **kw)):
        ins = [t for t in (q, k, v, kw.get("attn_mask")) if t is not None and t.requires_grad]
        for t in ins:
            t.grad = None
        out = fn()
        (out * out.detach().cos()).sum().backward()
        res.append((out.detach().numpy(), [t.grad.numpy().copy() for t in ins]))
    return res


def _mask(kind, batch, L, S):
    if kind == "bool":
        return mg.tensor(RNG.random((L, S)) > 0.4)
    if kind == "bool_rows_empty":   # whole rows masked: output 0 and no gradient, as the naive path
        m = RNG.random(batch + (L, S)) > 0.4
        m[..., 3, :] = False
        return mg.tensor(m)
    if kind == "float":
        return mg.tensor(RNG.standard_normal((batch[-1], L, S)), dtype=mg.float64)
    if kind == "float_inf":
        m = np.where(RNG.random((L, S)) > 0.3, 0.0, -np.inf)
        return mg.tensor(m, dtype=mg.float64)
    return None


@pytest.mark.parametrize("mask", [None, "causal", "bool", "bool_rows_empty", "float", "float_inf"])
@pytest.mark.parametrize("L, S, block", [(37, 29, 8), (16, 16, 16), (5, 40, 7), (33, 33, 1000)])
def test_flash_equals_naive_values_and_gradients(mask, L, S, block):
    if mask == "causal" and L > S:
        S = L
    batch = (2, 3)
    q, k, v = T(*batch, L, 5), T(*batch, S, 5), T(*batch, S, 4)
    kw = {"is_causal": True} if mask == "causal" else {"attn_mask": _mask(mask, batch, L, S)}
    (o_naive, g_naive), (o_flash, g_flash) = _both(q, k, v, block, **kw)
    np.testing.assert_allclose(o_flash, o_naive, rtol=1e-12, atol=1e-13)
    for a, b in zip(g_flash, g_naive):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_broadcast_batch_dims_and_explicit_scale():
    q, k, v = T(2, 1, 9, 4), T(1, 3, 11, 4), T(2, 3, 11, 6)
    (o1, g1), (o2, g2) = _both(q, k, v, 4, scale=0.3)
    np.testing.assert_allclose(o2, o1, rtol=1e-12)
    for a, b in zip(g2, g1):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kind", ["plain", "causal", "float_mask_with_grad"])
def test_gradcheck_float64(kind):
    q, k, v = T(2, 6, 3), T(2, 6, 3), T(2, 6, 2)
    if kind == "float_mask_with_grad":
        m = T(6, 6)
        assert gradcheck(lambda q, k, v, m: flash_attention(q, k, v, attn_mask=m, block_size=4), (q, k, v, m))
    else:
        causal = kind == "causal"
        assert gradcheck(lambda q, k, v: flash_attention(q, k, v, is_causal=causal, block_size=4), (q, k, v))


def test_sdpa_picks_flash_by_flag_and_above_the_threshold(monkeypatch):
    seen = []
    real = FlashAttention.forward

    def spy(ctx, *args, **kwargs):
        seen.append(1)
        return real(ctx, *args, **kwargs)
    monkeypatch.setattr(FlashAttention, "forward", staticmethod(spy))
    q = T(1, 8, 4)
    F.scaled_dot_product_attention(q, q, q)
    assert seen == []                                    # small: naive
    F.scaled_dot_product_attention(q, q, q, use_flash=True)
    assert seen == [1]
    monkeypatch.setattr(attention, "FLASH_MIN_SCORES", 64)   # the threshold lives beside the function
    F.scaled_dot_product_attention(q, q, q)             # L * S = 64 >= threshold
    F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)   # dropout: only the naive path has it
    F.scaled_dot_product_attention(q, q, q, use_flash=False)
    assert seen == [1, 1]


def test_errors_name_the_op_and_shapes():
    q = T(2, 4, 3)
    with pytest.raises(ShapeError, match=r"flash_attention: .*query \(2, 4, 3\), key \(2, 4, 5\)"):
        flash_attention(q, T(2, 4, 5), T(2, 4, 5))
    with pytest.raises(ShapeError, match="attn_mask shape"):
        flash_attention(q, q, q, attn_mask=mg.ones(3, 3).bool())
    with pytest.raises(ArgumentError, match="not both"):
        flash_attention(q, q, q, attn_mask=mg.ones(4, 4).bool(), is_causal=True)
    with pytest.raises(DTypeError, match="share a floating dtype"):
        flash_attention(q, q.float(), q)


def test_memory_grows_with_L_not_L_squared():
    def peak(fn, L):
        q = mg.randn(2, L, 16)
        with mg.no_grad():
            fn(q)
            tracemalloc.start()
            tracemalloc.reset_peak()
            fn(q)
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        return peak
    naive = lambda q: F.scaled_dot_product_attention(q, q, q, use_flash=False)   # noqa: E731
    flash = lambda q: flash_attention(q, q, q, block_size=64)                   # noqa: E731
    n1, n2 = peak(naive, 256), peak(naive, 1024)
    f1, f2 = peak(flash, 256), peak(flash, 1024)
    assert n2 > 10 * n1                      # the (L, L) scores: x16 for x4 in L
    assert f2 < 6 * f1 and f2 < n2 / 8       # tiles: linear in L
