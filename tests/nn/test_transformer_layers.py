"""nn.Transformer and its layers: PyTorch's equations (against NumPy), names, layouts, masks, gradients."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.autograd import gradcheck
from minigrad.errors import ArgumentError


def _np(t):
    return t.detach().numpy()


def _ln(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def _mha(q, kv, sd, prefix, H, mask=None):
    """PyTorch's MultiheadAttention on (L, N, E) arrays, float additive mask (L, S)."""
    E = q.shape[-1]
    W, b = sd[prefix + "in_proj_weight"], sd[prefix + "in_proj_bias"]
    Q, K, V = q @ W[:E].T + b[:E], kv @ W[E:2 * E].T + b[E:2 * E], kv @ W[2 * E:].T + b[2 * E:]
    L, N, S, D = q.shape[0], q.shape[1], kv.shape[0], E // H
    split = lambda a, n: a.reshape(n, N, H, D).transpose(1, 2, 0, 3)  # noqa: E731  (N, H, n, D)
    s = split(Q, L) @ split(K, S).transpose(0, 1, 3, 2) / np.sqrt(D)
    if mask is not None:
        s = s + mask
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    out = (p @ split(V, S)).transpose(2, 0, 1, 3).reshape(L, N, E)
    return out @ sd[prefix + "out_proj.weight"].T + sd[prefix + "out_proj.bias"]


def _ff(x, sd, p):
    return np.maximum(x @ sd[p + "linear1.weight"].T + sd[p + "linear1.bias"], 0) @ sd[p + "linear2.weight"].T \
        + sd[p + "linear2.bias"]


def _norm(x, sd, name):
    return _ln(x, sd[name + ".weight"], sd[name + ".bias"])


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_and_decoder_layers_match_the_numpy_reference(norm_first):
    enc = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, norm_first=norm_first).double()
    dec = nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0, norm_first=norm_first).double()
    rng = np.random.default_rng(0)
    src, tgt = rng.standard_normal((5, 2, 8)), rng.standard_normal((4, 2, 8))
    mask = np.triu(np.full((4, 4), -np.inf), 1)
    sd = {k: _np(v) for k, v in enc.state_dict().items()}
    if norm_first:
        x = src + _mha(_norm(src, sd, "norm1"), _norm(src, sd, "norm1"), sd, "self_attn.", 2)
        ref_mem = x + _ff(_norm(x, sd, "norm2"), sd, "")
    else:
        x = _norm(src + _mha(src, src, sd, "self_attn.", 2), sd, "norm1")
        ref_mem = _norm(x + _ff(x, sd, ""), sd, "norm2")
    mem = enc(mg.tensor(src))
    np.testing.assert_allclose(_np(mem), ref_mem, rtol=1e-10, atol=1e-10)
    sd = {k: _np(v) for k, v in dec.state_dict().items()}
    if norm_first:
        n1 = _norm(tgt, sd, "norm1")
        x = tgt + _mha(n1, n1, sd, "self_attn.", 2, mask)
        x = x + _mha(_norm(x, sd, "norm2"), ref_mem, sd, "multihead_attn.", 2)
        ref = x + _ff(_norm(x, sd, "norm3"), sd, "")
    else:
        x = _norm(tgt + _mha(tgt, tgt, sd, "self_attn.", 2, mask), sd, "norm1")
        x = _norm(x + _mha(x, ref_mem, sd, "multihead_attn.", 2), sd, "norm2")
        ref = _norm(x + _ff(x, sd, ""), sd, "norm3")
    out = dec(mg.tensor(tgt), mem, tgt_mask=mg.tensor(mask))
    np.testing.assert_allclose(_np(out), ref, rtol=1e-10, atol=1e-10)


def test_gradcheck_encoder_and_decoder_layers():
    enc = nn.TransformerEncoderLayer(4, 2, dim_feedforward=6, dropout=0.0, activation="gelu").double()
    dec = nn.TransformerDecoderLayer(4, 2, dim_feedforward=6, dropout=0.0, batch_first=True).double()
    src = mg.randn(3, 1, 4, dtype=mg.float64, requires_grad=True)
    assert gradcheck(lambda s, w1, w2: enc(s), (src, enc.self_attn.in_proj_weight, enc.linear1.weight),
                     atol=1e-6, rtol=1e-4)
    tgt = mg.randn(1, 2, 4, dtype=mg.float64, requires_grad=True)
    mem = mg.randn(1, 3, 4, dtype=mg.float64, requires_grad=True)
    causal = nn.Transformer.generate_square_subsequent_mask(2, dtype=mg.float64)
    assert gradcheck(lambda t, m, w: dec(t, m, tgt_mask=causal), (tgt, mem, dec.multihead_attn.in_proj_weight),
                     atol=1e-6, rtol=1e-4)


def test_transformer_names_layouts_and_copies():
    model = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=1, dim_feedforward=16,
                           dropout=0.0)
    names = list(model.state_dict())
    assert names[0] == "encoder.layers.0.self_attn.in_proj_weight" and "encoder.norm.weight" in names
    assert "decoder.layers.0.multihead_attn.out_proj.bias" in names and "decoder.layers.0.norm3.bias" in names
    assert model.encoder.layers[0].linear1.weight is not model.encoder.layers[1].linear1.weight
    src, tgt = mg.randn(5, 2, 8), mg.randn(3, 2, 8)
    out = model(src, tgt, tgt_mask=nn.Transformer.generate_square_subsequent_mask(3))
    assert tuple(out.shape) == (3, 2, 8)
    bf = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=1, dim_feedforward=16,
                        dropout=0.0, batch_first=True)
    bf.load_state_dict(model.state_dict())
    out_bf = bf(src.transpose(0, 1), tgt.transpose(0, 1),
                tgt_mask=nn.Transformer.generate_square_subsequent_mask(3))
    np.testing.assert_allclose(_np(out_bf.transpose(0, 1)), _np(out), rtol=1e-5, atol=1e-6)
    with pytest.raises(ArgumentError, match="batch number"):
        model(src, mg.randn(3, 4, 8))
    np.testing.assert_array_equal(_np(nn.Transformer.generate_square_subsequent_mask(3)),
                                  [[0, -np.inf, -np.inf], [0, 0, -np.inf], [0, 0, 0]])


def test_padding_masks_and_a_causal_encoder_ignore_what_they_hide():
    mg.manual_seed(0)
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True), 2)
    x = mg.randn(1, 4, 8)
    pad = mg.tensor([[False, False, False, True]])
    a = enc(x, src_key_padding_mask=pad)
    y = x.clone()
    y[0, 3] = 100.0                                            # change only the padded position
    b = enc(y, src_key_padding_mask=pad)
    np.testing.assert_allclose(_np(a)[0, :3], _np(b)[0, :3], rtol=1e-5, atol=1e-6)
    mask = nn.Transformer.generate_square_subsequent_mask(4)
    c, d = enc(x, mask=mask, is_causal=True), enc(y, mask=mask, is_causal=True)
    np.testing.assert_allclose(_np(c)[0, :3], _np(d)[0, :3], rtol=1e-5, atol=1e-6)   # the future is hidden
