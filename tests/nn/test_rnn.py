"""RNN, LSTM, GRU and their cells: PyTorch's equations (against a NumPy reference), parameter names and
shapes, every gate float64-gradchecked, multi-layer / bidirectional / batch_first / unbatched / dropout."""
import warnings

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.autograd import gradcheck
from minigrad.errors import ArgumentError, ShapeError


def _x(*shape, device=None):
    return mg.randn(*shape, dtype=mg.float64, requires_grad=True, device=device)


def _sig(v):
    return 1.0 / (1.0 + np.exp(-v))


# --- a NumPy reference: PyTorch's documented equations, one direction of one layer --------------------
def _ref_cell(mode, x, h, c, w_ih, w_hh, b_ih, b_hh, w_hr=None):
    xp, hp = x @ w_ih.T + b_ih, h @ w_hh.T + b_hh
    if mode in ("RNN_TANH", "RNN_RELU"):
        pre = xp + hp
        return (np.tanh(pre) if mode == "RNN_TANH" else np.maximum(pre, 0)), None
    if mode == "LSTM":
        i, f, g, o = np.split(xp + hp, 4, axis=-1)
        c = _sig(f) * c + _sig(i) * np.tanh(g)
        h = _sig(o) * np.tanh(c)
        return (h if w_hr is None else h @ w_hr.T), c
    r = _sig(xp[:, :h.shape[1]] + hp[:, :h.shape[1]])
    z = _sig(xp[:, h.shape[1]:2 * h.shape[1]] + hp[:, h.shape[1]:2 * h.shape[1]])
    n = np.tanh(xp[:, 2 * h.shape[1]:] + r * hp[:, 2 * h.shape[1]:])
    return (1 - z) * n + z * h, None


def _ref_forward(m, x, h0, c0):
    """(L, N, H_in) -> output, h_n, c_n, by looping over layers, directions and steps in NumPy."""
    D = 2 if m.bidirectional else 1
    sd = {k: v.detach().numpy() for k, v in m.state_dict().items()}
    out, hn, cn = x, [], []
    for layer in range(m.num_layers):
        outs = []
        for d in range(D):
            sfx = f"_l{layer}" + ("_reverse" if d else "")
            k = layer * D + d
            h, c = h0[k], (None if c0 is None else c0[k])
            steps = range(out.shape[0] - 1, -1, -1) if d else range(out.shape[0])
            seq = [None] * out.shape[0]
            for t in steps:
                h, c = _ref_cell(m.mode, out[t], h, c, sd["weight_ih" + sfx], sd["weight_hh" + sfx],
                                 sd.get("bias_ih" + sfx, 0.0), sd.get("bias_hh" + sfx, 0.0), sd.get("weight_hr" + sfx))
                seq[t] = h
            outs.append(np.stack(seq))
            hn.append(h)
            cn.append(c)
        out = np.concatenate(outs, axis=-1)
    return out, np.stack(hn), (np.stack(cn) if c0 is not None else None)


CONFIGS = [
    (nn.RNN, dict(num_layers=2)),
    (nn.RNN, dict(nonlinearity="relu", bidirectional=True)),
    (nn.LSTM, dict(num_layers=2, bidirectional=True)),
    (nn.LSTM, dict(proj_size=2, num_layers=2)),
    (nn.GRU, dict(num_layers=2, bidirectional=True, bias=False)),
]


@pytest.mark.parametrize("cls,kw", CONFIGS, ids=lambda v: v.__name__ if isinstance(v, type) else str(v))
def test_forward_matches_the_numpy_reference(cls, kw):
    m = cls(3, 4, **kw).double()
    L, N = 5, 2
    D, layers = (2 if kw.get("bidirectional") else 1), kw.get("num_layers", 1)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((L, N, 3))
    h0 = rng.standard_normal((D * layers, N, kw.get("proj_size") or 4))
    c0 = rng.standard_normal((D * layers, N, 4)) if cls is nn.LSTM else None
    hx = mg.tensor(h0) if c0 is None else (mg.tensor(h0), mg.tensor(c0))
    out, state = m(mg.tensor(x), hx)
    ref_out, ref_h, ref_c = _ref_forward(m, x, h0, c0)
    np.testing.assert_allclose(out.detach().numpy(), ref_out, rtol=1e-12, atol=1e-12)
    h = state[0] if cls is nn.LSTM else state
    np.testing.assert_allclose(h.detach().numpy(), ref_h, rtol=1e-12, atol=1e-12)
    if cls is nn.LSTM:
        np.testing.assert_allclose(state[1].detach().numpy(), ref_c, rtol=1e-12, atol=1e-12)


# --- every gate, float64 gradcheck: the cells (each gate formula), then whole stacks through time --------
@pytest.mark.parametrize("make", [lambda: nn.RNNCell(3, 2), lambda: nn.RNNCell(3, 2, nonlinearity="relu"),
                                  lambda: nn.GRUCell(3, 2), lambda: nn.LSTMCell(3, 2)],
                         ids=["rnn_tanh", "rnn_relu", "gru", "lstm"])
def test_gradcheck_cells_with_respect_to_input_state_and_every_parameter(make, device):
    cell = make().double().to(device)
    params = tuple(cell.parameters())
    x, h = _x(2, 3, device=device), _x(2, 2, device=device)
    if isinstance(cell, nn.LSTMCell):
        c = _x(2, 2, device=device)
        assert gradcheck(lambda x, h, c, *p: cell(x, (h, c)), (x, h, c) + params, atol=1e-6, rtol=1e-4)
    else:
        assert gradcheck(lambda x, h, *p: cell(x, h), (x, h) + params, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("cls,kw", [(nn.RNN, dict(num_layers=2, bidirectional=True)),
                                    (nn.LSTM, dict(num_layers=2, bidirectional=True, proj_size=1)),
                                    (nn.GRU, dict(num_layers=2, bidirectional=True, batch_first=True))],
                         ids=["rnn", "lstm", "gru"])
def test_gradcheck_stacked_bidirectional_layers_through_time(cls, kw):
    """The time loop, the layer stacking and the reversed direction: gradients reach the input, the initial
    states and a weight of the first and of the last layer (the cells above check every parameter)."""
    m = cls(2, 2, **kw).double()
    picked = (m.weight_hh_l0, m.weight_ih_l1_reverse)
    x = _x(2, 3, 2)                                              # (N, L, H_in) or (L, N, H_in): 2 x 3
    n = 2 if kw.get("batch_first") else 3
    h0 = _x(4, n, kw.get("proj_size") or 2)
    if cls is nn.LSTM:
        c0 = _x(4, n, 2)
        fn = lambda x, h, c, *p: (lambda o, s: (o, s[0], s[1]))(*m(x, (h, c)))  # noqa: E731
        assert gradcheck(fn, (x, h0, c0) + picked, atol=1e-6, rtol=1e-4)
    else:
        assert gradcheck(lambda x, h, *p: m(x, h), (x, h0) + picked, atol=1e-6, rtol=1e-4)


# --- names, shapes, layouts --------------------------------------------------------------------------------
def test_parameter_names_and_shapes_are_pytorchs():
    m = nn.LSTM(3, 5, num_layers=2, bidirectional=True, proj_size=2)
    shapes = {k: tuple(v.shape) for k, v in m.state_dict().items()}
    assert list(shapes)[:5] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_hr_l0"]
    assert shapes["weight_ih_l0"] == (20, 3) and shapes["weight_hh_l0"] == (20, 2)
    assert shapes["weight_hr_l0_reverse"] == (2, 5) and shapes["weight_ih_l1"] == (20, 4)
    assert len(shapes) == 20 and len(m.all_weights) == 4
    g = nn.GRU(3, 4, bias=False)
    assert [k for k in g.state_dict()] == ["weight_ih_l0", "weight_hh_l0"]
    bound = 1 / np.sqrt(5)
    assert all(float(p.abs().max()) <= bound for p in m.parameters())


def test_batch_first_unbatched_and_default_states():
    m = nn.GRU(3, 4, num_layers=2, batch_first=True)
    x = mg.randn(2, 6, 3)
    out, h = m(x)
    assert tuple(out.shape) == (2, 6, 4) and tuple(h.shape) == (2, 2, 4)
    m2 = nn.GRU(3, 4, num_layers=2)
    m2.load_state_dict(m.state_dict())
    out2, h2 = m2(x.transpose(0, 1))
    np.testing.assert_allclose(out2.transpose(0, 1).detach().numpy(), out.detach().numpy(), rtol=1e-6)
    single, hs = m2(x[0])                                        # unbatched (L, H_in)
    assert tuple(single.shape) == (6, 4) and tuple(hs.shape) == (2, 4)
    np.testing.assert_allclose(single.detach().numpy(), out[0].detach().numpy(), rtol=1e-5, atol=1e-6)
    lstm = nn.LSTMCell(3, 4)
    h, c = lstm(mg.randn(3))
    assert tuple(h.shape) == (4,) and tuple(c.shape) == (4,)


def test_dropout_only_between_layers_and_only_in_training():
    m = nn.LSTM(3, 4, num_layers=2, dropout=1.0)                  # the second layer sees zeros
    x = mg.randn(5, 2, 3)
    out, _ = m(x)
    zero_in, _ = m(mg.zeros(5, 2, 3))
    layer2 = nn.LSTM(4, 4)
    layer2.load_state_dict({k.replace("_l1", "_l0"): v for k, v in m.state_dict().items() if "_l1" in k})
    np.testing.assert_allclose(out.detach().numpy(), layer2(mg.zeros(5, 2, 4))[0].detach().numpy(), rtol=1e-6)
    m.eval()
    a, b = m(x)[0], m(x)[0]
    np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    assert not np.allclose(a.detach().numpy(), out.detach().numpy())
    with pytest.warns(UserWarning, match="num_layers greater than 1"):
        nn.GRU(3, 4, dropout=0.5)


def test_clear_errors():
    m = nn.LSTM(3, 4, num_layers=2)
    with pytest.raises(ShapeError, match="input_size. Expected 3, got 5"):
        m(mg.randn(2, 1, 5))
    with pytest.raises(ShapeError, match=r"hidden size \(2, 1, 4\), got \(1, 1, 4\)"):
        m(mg.randn(2, 1, 3), (mg.zeros(1, 1, 4), mg.zeros(2, 1, 4)))
    with pytest.raises(ArgumentError, match="tuple"):
        m(mg.randn(2, 1, 3), mg.zeros(2, 1, 4))
    with pytest.raises(ArgumentError, match="nonlinearity"):
        nn.RNN(3, 4, nonlinearity="sigmoid")
    with pytest.raises(ArgumentError, match="hidden_size"):
        nn.GRU(3, 0)
    with pytest.raises(ShapeError, match="GRUCell: expected input"):
        nn.GRUCell(3, 2)(mg.randn(2, 4))


def test_an_lstm_language_model_learns_and_truncated_bptt_detaches():
    mg.manual_seed(0)
    emb, rnn, head = nn.Embedding(5, 8), nn.LSTM(8, 16), nn.Linear(16, 5)
    params = list(emb.parameters()) + list(rnn.parameters()) + list(head.parameters())
    opt = mg.optim.Adam(params, lr=0.05)
    seq = mg.tensor([[0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0]]).t()       # (L, 1): next token is +1 mod 5
    hidden = None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for step in range(60):
            out, hidden = rnn(emb(seq[:-1]), hidden)
            hidden = tuple(h.detach() for h in hidden)            # truncated BPTT, as word_language_model
            loss = nn.functional.cross_entropy(head(out).reshape(-1, 5), seq[1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
    assert loss.item() < 0.1
