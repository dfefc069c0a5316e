"""embedding (scatter-add backward) and scaled_dot_product_attention (masks, causal, dropout)."""
import math

import numpy as np
import pytest

import minigrad as mg
import minigrad.nn.functional as F
from minigrad.autograd import gradcheck
from minigrad.errors import ArgumentError, DTypeError, OpIndexError, ShapeError

RNG = np.random.default_rng(5)


def t64(a, device=None, requires_grad=True):
    return mg.tensor(np.asarray(a, dtype=np.float64), requires_grad=requires_grad, device=device)


# --- embedding ------------------------------------------------------------------------------------
def test_embedding_forward_and_repeated_indices_accumulate(device):
    w = RNG.standard_normal((5, 3))
    idx = np.array([[0, 2, 2], [4, 2, 0]])
    W = t64(w, device)
    out = F.embedding(mg.tensor(idx, device=device), W)
    np.testing.assert_array_equal(out.detach().numpy(), w[idx])
    g = RNG.standard_normal((2, 3, 3))
    out.backward(mg.tensor(g, device=device))
    expected = np.zeros_like(w)
    for (i, j), k in np.ndenumerate(idx):
        expected[k] += g[i, j]
    np.testing.assert_allclose(W.grad.numpy(), expected, rtol=1e-12)
    assert np.all(W.grad.numpy()[[1, 3]] == 0)


def test_embedding_gradcheck_and_padding_idx(device):
    idx = mg.tensor([[1, 3, 1], [0, 3, 2]], device=device)
    assert gradcheck(lambda w: F.embedding(idx, w), (t64(RNG.standard_normal((4, 2)), device=device),))
    W = t64(RNG.standard_normal((4, 2)), device=device)
    F.embedding(idx, W, padding_idx=3).sum().backward()
    np.testing.assert_array_equal(W.grad.numpy(), [[1, 1], [2, 2], [1, 1], [0, 0]])
    W.grad = None
    F.embedding(idx, W, padding_idx=-1).sum().backward()  # -1 means the last row, as PyTorch
    np.testing.assert_array_equal(W.grad.numpy()[3], [0, 0])


def test_embedding_float32_and_int32_indices(device):
    W = mg.randn(6, 4, requires_grad=True, device=device)
    out = F.embedding(mg.tensor(np.array([5, 0, 5], dtype=np.int32), device=device), W)
    out.sum().backward()
    assert out.dtype == W.grad.dtype == mg.float32
    np.testing.assert_array_equal(W.grad.numpy()[5], [2, 2, 2, 2])


def test_embedding_misuse():
    W = mg.randn(5, 3)
    with pytest.raises(OpIndexError, match=r"embedding: index 5 is out of range for 5 embeddings"):
        F.embedding(mg.tensor([0, 5]), W)
    with pytest.raises(OpIndexError, match=r"embedding: index -1 is out of range"):
        F.embedding(mg.tensor([-1, 2]), W)
    with pytest.raises(DTypeError, match="embedding: indices must be an integer tensor"):
        F.embedding(mg.tensor([0.0, 1.0]), W)
    with pytest.raises(ArgumentError, match="embedding: padding_idx"):
        F.embedding(mg.tensor([0]), W, padding_idx=5)


# --- attention ------------------------------------------------------------------------------------
def ref_sdpa(q, k, v, mask=None, causal=False, scale=None):
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ np.swapaxes(k, -1, -2) * scale
    if causal:
        mask = np.tril(np.ones((q.shape[-2], k.shape[-2]), dtype=bool))
    if mask is not None and mask.dtype == bool:
        s = np.where(mask, s, -np.inf)
    elif mask is not None:
        s = s + mask
    m = s.max(axis=-1, keepdims=True)
    e = np.exp(s - m)
    return (e / e.sum(axis=-1, keepdims=True)) @ v


def _qkv(B=2, H=2, L=3, S=4, E=5, Ev=3):
    return (RNG.standard_normal((B, H, L, E)), RNG.standard_normal((B, H, S, E)),
            RNG.standard_normal((B, H, S, Ev)))


def test_sdpa_plain_forward_and_gradcheck(device):
    q, k, v = _qkv()
    out = F.scaled_dot_product_attention(t64(q, device), t64(k, device), t64(v, device))
    np.testing.assert_allclose(out.detach().numpy(), ref_sdpa(q, k, v), rtol=1e-10)
    assert gradcheck(F.scaled_dot_product_attention, (t64(q, device), t64(k, device), t64(v, device)))


def test_sdpa_causal_forward_and_gradcheck(device):
    q, k, v = _qkv(L=4, S=4)
    out = F.scaled_dot_product_attention(t64(q, device), t64(k, device), t64(v, device), is_causal=True)
    np.testing.assert_allclose(out.detach().numpy(), ref_sdpa(q, k, v, causal=True), rtol=1e-10)
    # the first query attends only to the first key
    np.testing.assert_allclose(out.detach().numpy()[..., 0, :], v[..., 0, :], rtol=1e-12)
    assert gradcheck(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True),
                     (t64(q, device), t64(k, device), t64(v, device)))


def test_sdpa_bool_mask_broadcast_and_gradcheck(device):
    q, k, v = _qkv()
    mask = RNG.random((1, 1, 3, 4)) > 0.3
    mask[..., 0] = True  # no fully masked row here
    out = F.scaled_dot_product_attention(t64(q, device), t64(k, device), t64(v, device),
                                         attn_mask=mg.tensor(mask, device=device), scale=0.7)
    np.testing.assert_allclose(out.detach().numpy(), ref_sdpa(q, k, v, mask, scale=0.7), rtol=1e-10)
    assert gradcheck(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, attn_mask=mg.tensor(mask, device=device)),
                     (t64(q, device), t64(k, device), t64(v, device)))


def test_sdpa_float_mask_gets_gradient(device):
    q, k, v = _qkv(B=1)
    mask = RNG.standard_normal((3, 4))
    out = F.scaled_dot_product_attention(t64(q, device), t64(k, device), t64(v, device),
                                         attn_mask=t64(mask, device, False))
    np.testing.assert_allclose(out.detach().numpy(), ref_sdpa(q, k, v, mask), rtol=1e-10)
    assert gradcheck(lambda a, b, c, m: F.scaled_dot_product_attention(a, b, c, attn_mask=m),
                     (t64(q, device), t64(k, device), t64(v, device), t64(mask, device)))


def test_sdpa_broadcast_batch_dims_gradcheck(device):
    q = RNG.standard_normal((2, 3, 4))   # (B, L, E)
    k = RNG.standard_normal((1, 5, 4))   # shared across the batch
    v = RNG.standard_normal((5, 2))      # no batch dims at all
    out = F.scaled_dot_product_attention(t64(q, device), t64(k, device), t64(v, device))
    np.testing.assert_allclose(out.detach().numpy(), ref_sdpa(q, k, v), rtol=1e-10)
    assert gradcheck(F.scaled_dot_product_attention, (t64(q, device), t64(k, device), t64(v, device)))


def test_sdpa_fully_masked_row_gives_zeros_not_nan(device):
    q, k, v = _qkv(B=1, H=1)
    mask = np.ones((3, 4), dtype=bool)
    mask[1] = False
    qt, kt, vt = t64(q, device), t64(k, device), t64(v, device)
    out = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=mg.tensor(mask, device=device))
    res = out.detach().numpy()
    np.testing.assert_array_equal(res[0, 0, 1], 0.0)
    np.testing.assert_allclose(res[0, 0, [0, 2]], ref_sdpa(q, k, v)[0, 0, [0, 2]], rtol=1e-10)
    out.sum().backward()
    for t in (qt, kt, vt):
        assert np.all(np.isfinite(t.grad.numpy()))
    np.testing.assert_array_equal(qt.grad.numpy()[0, 0, 1], 0.0)


def test_sdpa_huge_scores_stable(device):
    q = mg.tensor(np.full((1, 2, 3), 100.0), device=device)
    k = mg.tensor(np.array([[[100.0, 100, 100], [-100, -100, -100]]]), device=device)
    v = mg.tensor(np.array([[[1.0, 2.0], [3.0, 4.0]]]), device=device)
    out = F.scaled_dot_product_attention(q, k, v).numpy()
    np.testing.assert_allclose(out, [[[1, 2], [1, 2]]], rtol=1e-6)


def test_sdpa_dropout_and_float32(device):
    q, k, v = (mg.tensor(a.astype(np.float32), requires_grad=True, device=device) for a in _qkv())
    g = mg.Generator().manual_seed(0)
    out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5, generator=g)
    out.sum().backward()
    assert out.dtype == q.grad.dtype == k.grad.dtype == v.grad.dtype == mg.float32
    full = F.scaled_dot_product_attention(q, k, v, dropout_p=0.0)
    assert not np.allclose(out.detach().numpy(), full.detach().numpy())
    q64, k64, v64 = _qkv(B=1, H=1)
    assert gradcheck(lambda a, b, c: F.scaled_dot_product_attention(
        a, b, c, dropout_p=0.3, generator=mg.Generator().manual_seed(2)),
        (t64(q64, device), t64(k64, device), t64(v64, device)))


def test_sdpa_misuse():
    q, k, v = (mg.tensor(a) for a in _qkv())
    with pytest.raises(ShapeError, match="scaled_dot_product_attention: query has embedding size 5 but key has 4"):
        F.scaled_dot_product_attention(q, mg.randn(2, 2, 4, 4), v)
    with pytest.raises(ShapeError, match="scaled_dot_product_attention: key has 4 positions but value has 3"):
        F.scaled_dot_product_attention(q, k, mg.randn(2, 2, 3, 3))
    with pytest.raises(ShapeError, match=r"scaled_dot_product_attention: attn_mask shape \(3, 3\)"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=mg.ones(3, 3).bool())
    with pytest.raises(ArgumentError, match="scaled_dot_product_attention: pass either attn_mask or is_causal"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=mg.ones(3, 4).bool(), is_causal=True)
    with pytest.raises(ArgumentError, match="scaled_dot_product_attention: dropout probability"):
        F.scaled_dot_product_attention(q, k, v, dropout_p=2.0)
