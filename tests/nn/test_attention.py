"""MultiheadAttention and TransformerBlock against NumPy references; causality; masks; layouts."""
import math

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn

_erf = np.vectorize(math.erf)


def _np(t):
    return t.detach().numpy()


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _softmax(s):
    m = np.max(s, axis=-1, keepdims=True)
    e = np.exp(s - m)
    return e / e.sum(-1, keepdims=True)


def mha_ref(mha, q_in, k_in, v_in, masked=None, add=None):
    """masked: bool (.., L, S) True = masked out; add: float mask added to the scores."""
    E, H = mha.embed_dim, mha.num_heads
    D = E // H
    W, b = _np(mha.in_proj_weight), _np(mha.in_proj_bias)
    q = q_in @ W[:E].T + b[:E]
    k = k_in @ W[E:2 * E].T + b[E:2 * E]
    v = v_in @ W[2 * E:].T + b[2 * E:]
    N, L, S = q.shape[0], q.shape[1], k.shape[1]
    q = q.reshape(N, L, H, D).transpose(0, 2, 1, 3)
    k = k.reshape(N, S, H, D).transpose(0, 2, 1, 3)
    v = v.reshape(N, S, H, D).transpose(0, 2, 1, 3)
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(D)
    if add is not None:
        s = s + add
    if masked is not None:
        s = np.where(masked, -np.inf, s)
    p = _softmax(s)
    o = (p @ v).transpose(0, 2, 1, 3).reshape(N, L, E)
    return o @ _np(mha.out_proj.weight).T + _np(mha.out_proj.bias), p


def _mha(E=8, H=2, device=None, **kw):
    kw.setdefault("batch_first", True)        # the references below are written for (N, L, E)
    m = nn.MultiheadAttention(E, H, dtype=mg.float64, device=device, **kw)
    with mg.no_grad():  # non-zero biases so the reference checks them
        m.in_proj_bias.normal_()
        m.out_proj.bias.normal_()
    return m


def test_mha_parameters_init_and_state_dict_names(device):
    m = nn.MultiheadAttention(16, 4, device=device)
    assert m.batch_first is False                                  # PyTorch's default: (L, N, E)
    assert list(m.state_dict()) == ["in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]
    assert m.in_proj_weight.shape == (48, 16)
    bound = math.sqrt(6 / (48 + 16))
    assert np.abs(_np(m.in_proj_weight)).max() <= bound
    assert not _np(m.in_proj_bias).any() and not _np(m.out_proj.bias).any()
    with pytest.raises(ValueError):
        nn.MultiheadAttention(10, 3)


def test_mha_self_attention_matches_reference_with_weights(device):
    m = _mha(device=device)
    x = _rand(3, 5, 8)
    out, w = m(mg.tensor(x, device=device), mg.tensor(x, device=device), mg.tensor(x, device=device))
    ref, p = mha_ref(m, x, x, x)
    np.testing.assert_allclose(_np(out), ref, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(_np(w), p.mean(1), rtol=1e-10, atol=1e-12)
    xt = mg.tensor(x, device=device)
    out2, none = m(xt, xt, xt, need_weights=False)   # fused path, shared-projection fast path
    assert none is None
    np.testing.assert_allclose(_np(out2), ref, rtol=1e-10, atol=1e-12)
    _, w_heads = m(xt, xt, xt, average_attn_weights=False)
    np.testing.assert_allclose(_np(w_heads), p, rtol=1e-10, atol=1e-12)


def test_mha_cross_attention_and_layouts(device):
    m = _mha(device=device)
    q, kv = _rand(2, 4, 8, seed=1), _rand(2, 6, 8, seed=2)
    ref, _ = mha_ref(m, q, kv, kv)
    out, w = m(mg.tensor(q, device=device), mg.tensor(kv, device=device), mg.tensor(kv, device=device))
    np.testing.assert_allclose(_np(out), ref, rtol=1e-10, atol=1e-12)
    assert w.shape == (2, 4, 6)
    seq_first = _mha(batch_first=False, device=device)
    seq_first.load_state_dict(m.state_dict())
    q_sf, kv_sf = mg.tensor(q.transpose(1, 0, 2), device=device), mg.tensor(kv.transpose(1, 0, 2), device=device)
    out_sf, _ = seq_first(q_sf, kv_sf, kv_sf)
    np.testing.assert_allclose(_np(out_sf), ref.transpose(1, 0, 2), rtol=1e-10, atol=1e-12)
    q_u, kv_u = mg.tensor(q[0], device=device), mg.tensor(kv[0], device=device)
    out_u, w_u = m(q_u, kv_u, kv_u)   # unbatched
    np.testing.assert_allclose(_np(out_u), ref[0], rtol=1e-10, atol=1e-12)
    assert w_u.shape == (4, 6)


def test_mha_masks_bool_float_and_key_padding(device):
    m = _mha(device=device)
    x = _rand(2, 5, 8, seed=3)
    xt = mg.tensor(x, device=device)
    causal = np.triu(np.ones((5, 5), dtype=bool), 1)
    ref, _ = mha_ref(m, x, x, x, masked=causal)
    for need in (True, False):
        out, _ = m(xt, xt, xt, is_causal=True, need_weights=need)
        np.testing.assert_allclose(_np(out), ref, rtol=1e-10, atol=1e-12)
        out, _ = m(xt, xt, xt, attn_mask=mg.tensor(causal, device=device), need_weights=need)
        np.testing.assert_allclose(_np(out), ref, rtol=1e-10, atol=1e-12)
    add = _rand(5, 5, seed=4)
    ref_add, _ = mha_ref(m, x, x, x, add=add)
    for need in (True, False):
        out, _ = m(xt, xt, xt, attn_mask=mg.tensor(add, device=device), need_weights=need)
        np.testing.assert_allclose(_np(out), ref_add, rtol=1e-10, atol=1e-12)
    kpm = np.array([[False] * 5, [False, False, False, True, True]])
    ref_k, _ = mha_ref(m, x, x, x, masked=kpm[:, None, None, :] | causal)
    for need in (True, False):
        out, _ = m(xt, xt, xt, key_padding_mask=mg.tensor(kpm, device=device), is_causal=True, need_weights=need)
        np.testing.assert_allclose(_np(out), ref_k, rtol=1e-10, atol=1e-12)
    # a float mask together with a bool key-padding mask
    ref_mix, _ = mha_ref(m, x, x, x, masked=np.broadcast_to(kpm[:, None, None, :], (2, 2, 5, 5)), add=add)
    for need in (True, False):
        out, _ = m(xt, xt, xt, key_padding_mask=mg.tensor(kpm, device=device), attn_mask=mg.tensor(add, device=device),
                   need_weights=need)
        np.testing.assert_allclose(_np(out), ref_mix, rtol=1e-10, atol=1e-12)
    per_head = np.broadcast_to(causal, (2 * 2, 5, 5))
    out, _ = m(xt, xt, xt, attn_mask=mg.tensor(np.ascontiguousarray(per_head), device=device))
    np.testing.assert_allclose(_np(out), ref, rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError):
        m(xt, xt, xt, attn_mask=mg.tensor(np.zeros((4, 4), dtype=bool), device=device))


@pytest.mark.parametrize("need_weights", [True, False])
def test_mha_causal_future_tokens_do_not_change_the_past(need_weights, device):
    m = _mha(E=12, H=3, device=device)
    x = _rand(2, 7, 12, seed=5)
    y = x.copy()
    t = 3
    y[:, t + 1:] = _rand(2, 7 - t - 1, 12, seed=6)         # change only the future
    ox, _ = m(mg.tensor(x, device=device), is_causal=True, need_weights=need_weights)
    oy, _ = m(mg.tensor(y, device=device), is_causal=True, need_weights=need_weights)
    np.testing.assert_allclose(_np(ox)[:, :t + 1], _np(oy)[:, :t + 1], rtol=1e-12, atol=1e-12)
    assert not np.allclose(_np(ox)[:, t + 1:], _np(oy)[:, t + 1:])
    # and the gradient of an early output does not reach future inputs
    xt = mg.tensor(x, requires_grad=True, device=device)
    out, _ = m(xt, is_causal=True, need_weights=need_weights)
    out[:, t].sum().backward()
    g = xt.grad.numpy()
    assert np.all(g[:, t + 1:] == 0) and np.any(g[:, :t + 1] != 0)


def test_mha_dropout_only_in_training(device):
    m = _mha(dropout=0.5, device=device)
    x = mg.tensor(_rand(2, 6, 8), device=device)
    m.eval()
    a, _ = m(x, need_weights=False)
    b, _ = m(x, need_weights=False)
    np.testing.assert_array_equal(_np(a), _np(b))
    m.train()
    c, _ = m(x, need_weights=False)
    assert not np.allclose(_np(a), _np(c))


def test_mha_separate_kdim_vdim(device):
    m = nn.MultiheadAttention(8, 2, kdim=5, vdim=3, dtype=mg.float64, device=device, batch_first=True)
    assert m.in_proj_weight is None and m.k_proj_weight.shape == (8, 5)
    assert set(m.state_dict()) == {"q_proj_weight", "k_proj_weight", "v_proj_weight", "in_proj_bias",
                                   "out_proj.weight", "out_proj.bias"}
    q, k, v = _rand(2, 4, 8), _rand(2, 6, 5), _rand(2, 6, 3)
    out, _ = m(mg.tensor(q, device=device), mg.tensor(k, device=device), mg.tensor(v, device=device))
    Wq, Wk, Wv = _np(m.q_proj_weight), _np(m.k_proj_weight), _np(m.v_proj_weight)
    b = _np(m.in_proj_bias)
    qq = (q @ Wq.T + b[:8]).reshape(2, 4, 2, 4).transpose(0, 2, 1, 3)
    kk = (k @ Wk.T + b[8:16]).reshape(2, 6, 2, 4).transpose(0, 2, 1, 3)
    vv = (v @ Wv.T + b[16:]).reshape(2, 6, 2, 4).transpose(0, 2, 1, 3)
    o = (_softmax(qq @ kk.transpose(0, 1, 3, 2) / 2.0) @ vv).transpose(0, 2, 1, 3).reshape(2, 4, 8)
    ref = o @ _np(m.out_proj.weight).T + _np(m.out_proj.bias)
    np.testing.assert_allclose(_np(out), ref, rtol=1e-10, atol=1e-12)


# --- TransformerBlock ---------------------------------------------------------------------------------
def _ln(x, w, b, eps=1e-5):
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps) * w + b


def test_transformer_block_matches_reference(device):
    blk = nn.TransformerBlock(8, 2, dtype=mg.float64, device=device)
    assert blk.d_ff == 32
    with mg.no_grad():
        for p in blk.parameters():
            p.add_(mg.randn(*p.shape, dtype=mg.float64, device=device) * 0.1)
    x = _rand(2, 5, 8)
    y = blk(mg.tensor(x, device=device), is_causal=True)
    P = {k: _np(v) for k, v in blk.state_dict().items()}
    h = _ln(x, P["ln1.weight"], P["ln1.bias"])
    a, _ = mha_ref(blk.attn, h, h, h, masked=np.triu(np.ones((5, 5), dtype=bool), 1))
    x1 = x + a
    h2 = _ln(x1, P["ln2.weight"], P["ln2.bias"]) @ P["mlp.fc.weight"].T + P["mlp.fc.bias"]
    h2 = 0.5 * h2 * (1 + _erf(h2 / math.sqrt(2)))
    ref = x1 + h2 @ P["mlp.proj.weight"].T + P["mlp.proj.bias"]
    np.testing.assert_allclose(_np(y), ref, rtol=1e-10, atol=1e-12)
    assert list(blk.state_dict()) == [
        "ln1.weight", "ln1.bias", "attn.in_proj_weight", "attn.in_proj_bias", "attn.out_proj.weight",
        "attn.out_proj.bias", "ln2.weight", "ln2.bias", "mlp.fc.weight", "mlp.fc.bias", "mlp.proj.weight",
        "mlp.proj.bias"]
    causal_blk = nn.TransformerBlock(8, 2, causal=True, dtype=mg.float64, device=device)
    causal_blk.load_state_dict(blk.state_dict())
    np.testing.assert_allclose(_np(causal_blk(mg.tensor(x, device=device))), ref, rtol=1e-10, atol=1e-12)


def test_transformer_block_dropout_and_causality(device):
    blk = nn.TransformerBlock(12, 3, d_ff=20, dropout=0.3, causal=True, dtype=mg.float64, device=device)
    x = _rand(1, 6, 12)
    blk.eval()
    a, b = _np(blk(mg.tensor(x, device=device))), _np(blk(mg.tensor(x, device=device)))
    np.testing.assert_array_equal(a, b)
    y = x.copy()
    y[:, 4:] += 1.0
    np.testing.assert_allclose(_np(blk(mg.tensor(y, device=device)))[:, :4], a[:, :4], rtol=1e-12, atol=1e-12)
    blk.train()
    assert not np.allclose(_np(blk(mg.tensor(x, device=device))), a)
