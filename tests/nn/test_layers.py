"""Every layer's output against a NumPy reference written out in the test (never computed by minigrad)."""
import math
from collections import OrderedDict

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn


def _np(t):
    return t.detach().numpy()


def _t(a, device, **kw):
    return mg.tensor(a, device=device, **kw)


def _rand(*shape, dtype=np.float64, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# --- Linear ---------------------------------------------------------------------------------------
def test_linear_output_and_init_bounds(device):
    m = nn.Linear(5, 3, device=device)
    x = _rand(2, 4, 5, dtype=np.float32)
    y = m(_t(x, device))
    ref = x @ _np(m.weight).T + _np(m.bias)
    np.testing.assert_allclose(_np(y), ref, rtol=1e-5, atol=1e-6)
    assert y.shape == (2, 4, 3) and y.dtype == mg.float32
    bound = 1 / math.sqrt(5)
    assert np.abs(_np(m.weight)).max() <= bound and np.abs(_np(m.bias)).max() <= bound
    nb = nn.Linear(5, 3, bias=False, device=device)
    assert nb.bias is None and len(list(nb.parameters())) == 1
    np.testing.assert_allclose(_np(nb(_t(x, device))), x @ _np(nb.weight).T, rtol=1e-5, atol=1e-6)


def test_layer_dtype_and_device_arguments(device):
    m = nn.Linear(3, 2, dtype=mg.float64, device=device)
    assert m.weight.dtype == mg.float64 and m.weight.device == device
    c = nn.Conv2d(1, 2, 3, dtype="float64")
    assert c.weight.dtype == mg.float64 and c.bias.dtype == mg.float64


def test_identity_and_flatten(device):
    x = mg.randn(2, 3, 4, 5, device=device)
    assert nn.Identity(1, foo=2)(x) is x
    assert nn.Flatten()(x).shape == (2, 60)
    assert nn.Flatten(0, 1)(x).shape == (6, 4, 5)
    np.testing.assert_array_equal(_np(nn.Flatten()(x)), _np(x).reshape(2, -1))
    assert nn.Unflatten(1, (3, 20))(nn.Flatten()(x)).shape == (2, 3, 20)


# --- convolutions ---------------------------------------------------------------------------------
def _conv2d_ref(x, w, b, stride, pad, dilation=(1, 1), groups=1):
    N, C, H, W = x.shape
    O, Cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    Ho = (H + 2 * pad[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    Wo = (W + 2 * pad[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((N, O, Ho, Wo))
    Og = O // groups
    for n in range(N):
        for o in range(O):
            g = o // Og
            for i in range(Ho):
                for j in range(Wo):
                    acc = 0.0
                    for c in range(Cg):
                        for a in range(kh):
                            for bb in range(kw):
                                acc += w[o, c, a, bb] * xp[n, g * Cg + c, i * stride[0] + a * dilation[0],
                                                           j * stride[1] + bb * dilation[1]]
                    out[n, o, i, j] = acc + (b[o] if b is not None else 0.0)
    return out


@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1), dict(padding=2, dilation=2),
                                dict(groups=2, padding=1), dict(bias=False, stride=(1, 2))])
def test_conv2d_matches_reference(kw, device):
    m = nn.Conv2d(4, 6, 3, dtype=mg.float64, device=device, **kw)
    x = _rand(2, 4, 7, 6)
    y = m(_t(x, device))
    ref = _conv2d_ref(x, _np(m.weight), None if m.bias is None else _np(m.bias), m.stride,
                      m.padding, m.dilation, m.groups)
    np.testing.assert_allclose(_np(y), ref, rtol=1e-10, atol=1e-12)
    fan_in = 4 // m.groups * 9
    assert np.abs(_np(m.weight)).max() <= 1 / math.sqrt(fan_in)
    assert m.weight.shape == (6, 4 // m.groups, 3, 3)


def test_conv2d_same_padding(device):
    m = nn.Conv2d(2, 3, (3, 5), padding="same", dtype=mg.float64, device=device)
    x = _rand(1, 2, 6, 7)
    y = m(_t(x, device))
    assert y.shape == (1, 3, 6, 7)
    np.testing.assert_allclose(_np(y), _conv2d_ref(x, _np(m.weight), _np(m.bias), (1, 1), (1, 2)), rtol=1e-10)
    with pytest.raises(ValueError):
        nn.Conv2d(2, 3, 3, stride=2, padding="same")
    with pytest.raises(ValueError):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError):
        nn.Conv2d(2, 4, 3, padding_mode="reflect")


def test_conv1d_matches_reference(device):
    m = nn.Conv1d(3, 5, 4, stride=2, padding=1, dtype=mg.float64, device=device)
    x = _rand(2, 3, 11)
    y = m(_t(x, device))
    w, b = _np(m.weight), _np(m.bias)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1)))
    L = (11 + 2 - 4) // 2 + 1
    ref = np.zeros((2, 5, L))
    for n in range(2):
        for o in range(5):
            for i in range(L):
                ref[n, o, i] = (w[o] * xp[n, :, 2 * i:2 * i + 4]).sum() + b[o]
    np.testing.assert_allclose(_np(y), ref, rtol=1e-10)


# --- pooling --------------------------------------------------------------------------------------
def _pool_ref(x, k, s, p, fn, pad_value):
    N, C, H, W = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=pad_value)
    Ho, Wo = (H + 2 * p - k) // s + 1, (W + 2 * p - k) // s + 1
    out = np.zeros((N, C, Ho, Wo))
    for i in range(Ho):
        for j in range(Wo):
            out[:, :, i, j] = fn(xp[:, :, i * s:i * s + k, j * s:j * s + k], axis=(2, 3))
    return out


def test_maxpool2d_avgpool2d(device):
    x = _rand(2, 3, 8, 7)
    np.testing.assert_allclose(_np(nn.MaxPool2d(2)(_t(x, device))), _pool_ref(x, 2, 2, 0, np.max, -np.inf))
    np.testing.assert_allclose(_np(nn.MaxPool2d(3, stride=2, padding=1)(_t(x, device))),
                               _pool_ref(x, 3, 2, 1, np.max, -np.inf))
    np.testing.assert_allclose(_np(nn.AvgPool2d(2)(_t(x, device))), _pool_ref(x, 2, 2, 0, np.mean, 0.0))
    np.testing.assert_allclose(_np(nn.AvgPool2d(3, 2, 1)(_t(x, device))), _pool_ref(x, 3, 2, 1, np.mean, 0.0))
    out, idx = nn.MaxPool2d(2, return_indices=True)(_t(x, device))
    assert idx.shape == out.shape and idx.dtype == mg.int64


def test_adaptive_avg_pool2d(device):
    x = _rand(2, 3, 7, 5)
    y = nn.AdaptiveAvgPool2d((3, 2))(_t(x, device))
    ref = np.zeros((2, 3, 3, 2))
    for i in range(3):
        h0, h1 = (i * 7) // 3, -(-((i + 1) * 7) // 3)
        for j in range(2):
            w0, w1 = (j * 5) // 2, -(-((j + 1) * 5) // 2)
            ref[:, :, i, j] = x[:, :, h0:h1, w0:w1].mean(axis=(2, 3))
    np.testing.assert_allclose(_np(y), ref, rtol=1e-12)
    g = nn.AdaptiveAvgPool2d(1)(_t(x, device))
    np.testing.assert_allclose(_np(g), x.mean(axis=(2, 3), keepdims=True), rtol=1e-12)


# --- normalisation --------------------------------------------------------------------------------
def test_batchnorm2d_training_eval_and_running_stats(device):
    bn = nn.BatchNorm2d(3, momentum=0.2, dtype=mg.float64, device=device)
    with mg.no_grad():
        bn.weight.copy_(_t([1.0, 2.0, 0.5], device, dtype=mg.float64))
        bn.bias.copy_(_t([0.0, -1.0, 3.0], device, dtype=mg.float64))
    w, b = _np(bn.weight).reshape(1, 3, 1, 1), _np(bn.bias).reshape(1, 3, 1, 1)
    rm, rv = np.zeros(3), np.ones(3)
    for step in range(3):
        x = _rand(4, 3, 5, 5, seed=step) * 2 + 1
        y = bn(_t(x, device))
        mean = x.mean(axis=(0, 2, 3))
        var = x.var(axis=(0, 2, 3))
        ref = (x - mean.reshape(1, 3, 1, 1)) / np.sqrt(var.reshape(1, 3, 1, 1) + 1e-5) * w + b
        np.testing.assert_allclose(_np(y), ref, rtol=1e-10, atol=1e-10)
        n = x.size / 3
        rm = 0.8 * rm + 0.2 * mean
        rv = 0.8 * rv + 0.2 * var * n / (n - 1)
        np.testing.assert_allclose(_np(bn.running_mean), rm, rtol=1e-12)
        np.testing.assert_allclose(_np(bn.running_var), rv, rtol=1e-12)
    assert bn.num_batches_tracked.item() == 3
    bn.eval()
    x = _rand(2, 3, 4, 4, seed=9)
    y = bn(_t(x, device))
    ref = (x - rm.reshape(1, 3, 1, 1)) / np.sqrt(rv.reshape(1, 3, 1, 1) + 1e-5) * w + b
    np.testing.assert_allclose(_np(y), ref, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(_np(bn.running_mean), rm)           # eval does not update
    assert bn.num_batches_tracked.item() == 3


def test_batchnorm1d_cumulative_momentum_no_affine_no_tracking(device):
    bn = nn.BatchNorm1d(4, momentum=None, affine=False, dtype=mg.float64, device=device)
    assert bn.weight is None and list(bn.parameters()) == []
    xs = [_rand(8, 4, seed=s) for s in range(3)]
    for x in xs:
        bn(_t(x, device))
    np.testing.assert_allclose(_np(bn.running_mean), np.mean([x.mean(0) for x in xs], axis=0), rtol=1e-12)
    x3 = _rand(6, 4, 3, seed=5)                                    # (N, C, L) input
    y = bn(_t(x3, device))
    ref = (x3 - x3.mean(axis=(0, 2), keepdims=True)) / np.sqrt(x3.var(axis=(0, 2), keepdims=True) + 1e-5)
    np.testing.assert_allclose(_np(y), ref, rtol=1e-10, atol=1e-12)
    free = nn.BatchNorm1d(4, track_running_stats=False, dtype=mg.float64, device=device).eval()
    assert free.running_mean is None and list(free.state_dict()) == ["weight", "bias"]
    x = xs[0]
    np.testing.assert_allclose(_np(free(_t(x, device))), (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-5), rtol=1e-10)
    with pytest.raises(ValueError):
        nn.BatchNorm2d(4, device=device)(mg.randn(3, 4, device=device))
    assert list(nn.BatchNorm1d(2, device=device).state_dict()) == ["weight", "bias", "running_mean", "running_var",
                                                    "num_batches_tracked"]


def test_layernorm(device):
    ln = nn.LayerNorm((3, 4), eps=1e-6, dtype=mg.float64, device=device)
    with mg.no_grad():
        ln.weight.normal_()
        ln.bias.normal_()
    x = _rand(2, 5, 3, 4)
    y = ln(_t(x, device))
    mu = x.mean(axis=(2, 3), keepdims=True)
    var = x.var(axis=(2, 3), keepdims=True)
    ref = (x - mu) / np.sqrt(var + 1e-6) * _np(ln.weight) + _np(ln.bias)
    np.testing.assert_allclose(_np(y), ref, rtol=1e-10, atol=1e-12)
    plain = nn.LayerNorm(4, elementwise_affine=False, device=device)
    assert list(plain.parameters()) == []
    nobias = nn.LayerNorm(4, bias=False, device=device)
    assert nobias.bias is None and np.all(_np(nobias.weight) == 1)


# --- activations ----------------------------------------------------------------------------------
_erf = np.vectorize(math.erf)


@pytest.mark.parametrize("module,ref", [
    (nn.ReLU(), lambda x: np.maximum(x, 0)),
    (nn.LeakyReLU(0.2), lambda x: np.where(x > 0, x, 0.2 * x)),
    (nn.GELU(), lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2)))),
    (nn.GELU("tanh"), lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))),
    (nn.Sigmoid(), lambda x: 1 / (1 + np.exp(-x))),
    (nn.Tanh(), np.tanh),
    (nn.SiLU(), lambda x: x / (1 + np.exp(-x))),
    (nn.Softmax(dim=1), lambda x: np.exp(x) / np.exp(x).sum(1, keepdims=True)),
    (nn.LogSoftmax(dim=-1), lambda x: x - np.log(np.exp(x).sum(-1, keepdims=True))),
])
def test_activations(module, ref, device):
    x = _rand(3, 4, 5) * 3
    np.testing.assert_allclose(_np(module(_t(x, device))), ref(x), rtol=1e-9, atol=1e-12)


def test_softmax_implicit_dim_warns(device):
    with pytest.warns(UserWarning):
        y = nn.Softmax()(mg.randn(2, 3, device=device))
    np.testing.assert_allclose(_np(y).sum(1), 1, rtol=1e-6)


# --- dropout --------------------------------------------------------------------------------------
def test_dropout_train_eval(device):
    d = nn.Dropout(0.25)
    x = mg.ones(200, 200, device=device)
    y = _np(d(x))
    kept = y != 0
    assert 0.72 < kept.mean() < 0.78
    np.testing.assert_allclose(y[kept], 1 / 0.75, rtol=1e-6)
    d.eval()
    assert d(x) is x
    with pytest.raises(ValueError):
        nn.Dropout(1.5)
    g = mg.Generator().manual_seed(3)
    d1 = nn.Dropout(0.5, generator=g)
    a = _np(d1(x))
    g.manual_seed(3)
    np.testing.assert_array_equal(a, _np(d1(x)))


# --- embedding ------------------------------------------------------------------------------------
def test_embedding_lookup_padding_and_init(device):
    e = nn.Embedding(10, 4, padding_idx=2, device=device)
    w = _np(e.weight)
    assert np.all(w[2] == 0)
    idx = np.array([[1, 2, 9], [0, 0, 2]])
    y = e(_t(idx, device))
    np.testing.assert_array_equal(_np(y), w[idx])
    y.sum().backward()
    g = e.weight.grad.numpy()
    assert np.all(g[2] == 0) and np.all(g[0] == 2) and np.all(g[1] == 1)
    big = nn.Embedding(1000, 100, device=device)
    assert abs(_np(big.weight).mean()) < 0.02 and abs(_np(big.weight).std() - 1) < 0.02
    assert nn.Embedding(5, 2, padding_idx=-1, device=device).padding_idx == 4
    pre = nn.Embedding.from_pretrained(_t(np.arange(6.0).reshape(3, 2), device))
    assert not pre.weight.requires_grad
    np.testing.assert_array_equal(_np(pre(_t([2], device))), [[4.0, 5.0]])


# --- containers -----------------------------------------------------------------------------------
def test_sequential_indexing_len_append_and_forward(device):
    s = nn.Sequential(nn.Linear(3, 4, device=device), nn.ReLU(), nn.Linear(4, 2, device=device))
    assert len(s) == 3 and isinstance(s[0], nn.Linear) and s[-1] is s[2]
    sub = s[1:]
    assert isinstance(sub, nn.Sequential) and len(sub) == 2 and sub[0] is s[1]
    x = _rand(5, 3, dtype=np.float32)
    h = np.maximum(x @ _np(s[0].weight).T + _np(s[0].bias), 0)
    ref = h @ _np(s[2].weight).T + _np(s[2].bias)
    np.testing.assert_allclose(_np(s(_t(x, device))), ref, rtol=1e-5, atol=1e-6)
    s.append(nn.Tanh())
    assert len(s) == 4 and [n for n, _ in s.named_children()] == ["0", "1", "2", "3"]
    np.testing.assert_allclose(_np(s(_t(x, device))), np.tanh(ref), rtol=1e-5, atol=1e-6)
    del s[1]
    assert [n for n, _ in s.named_children()] == ["0", "1", "2"] and isinstance(s[1], nn.Linear)
    s.insert(1, nn.ReLU())
    assert isinstance(s[1], nn.ReLU) and len(s) == 4
    assert [type(m).__name__ for m in s] == ["Linear", "ReLU", "Linear", "Tanh"]
    named = nn.Sequential(OrderedDict(a=nn.Linear(2, 2, device=device), b=nn.ReLU()))
    assert named.a is named[0] and list(named.state_dict()) == ["a.weight", "a.bias"]
    with pytest.raises(IndexError):
        s[10]


def test_module_list_and_dict():
    ml = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    assert len(ml) == 3 and len(list(ml.parameters())) == 6
    ml.append(nn.ReLU())
    ml.extend([nn.Tanh()])
    ml += [nn.Identity()]
    assert len(ml) == 6 and isinstance(ml[-1], nn.Identity)
    assert [n for n, _ in ml.named_children()] == [str(i) for i in range(6)]
    assert isinstance(ml[:2], nn.ModuleList) and len(ml[:2]) == 2
    del ml[0]
    assert len(ml) == 5 and list(ml.state_dict())[0] == "0.weight"
    ml.insert(0, nn.Sigmoid())
    assert isinstance(ml[0], nn.Sigmoid)
    md = nn.ModuleDict({"enc": nn.Linear(2, 3), "dec": nn.Linear(3, 2)})
    assert list(md.keys()) == ["enc", "dec"] and "enc" in md and len(md) == 2
    md["act"] = nn.ReLU()
    assert list(md) == ["enc", "dec", "act"]
    assert list(md.state_dict()) == ["enc.weight", "enc.bias", "dec.weight", "dec.bias"]
    assert md.pop("act").__class__ is nn.ReLU and len(md) == 2
    pl = nn.ParameterList([nn.Parameter(mg.zeros(2)), mg.ones(3)])
    assert len(pl) == 2 and all(isinstance(p, nn.Parameter) for p in pl)
    assert list(pl.state_dict()) == ["0", "1"]
    pd = nn.ParameterDict({"a": mg.zeros(1)})
    assert isinstance(pd["a"], nn.Parameter) and list(pd.state_dict()) == ["a"]


# --- losses ---------------------------------------------------------------------------------------
def _log_softmax(x, axis=1):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def test_cross_entropy_loss_weight_ignore_smoothing(device):
    x = _rand(6, 4)
    y = np.array([0, 3, 1, -100, 2, 3])
    w = np.array([1.0, 2.0, 0.5, 1.5])
    logp = _log_softmax(x)
    valid = y != -100
    ys = np.where(valid, y, 0)
    nll = -logp[np.arange(6), ys] * w[ys] * valid
    ref_mean = nll.sum() / (w[ys] * valid).sum()
    loss = nn.CrossEntropyLoss(weight=_t(w, device))(_t(x, device), _t(y, device))
    np.testing.assert_allclose(loss.item(), ref_mean, rtol=1e-10)
    plain = nn.CrossEntropyLoss(reduction="none")(_t(x, device), _t(np.where(valid, y, 1), device))
    np.testing.assert_allclose(_np(plain), -logp[np.arange(6), np.where(valid, y, 1)], rtol=1e-10)
    eps = 0.1
    y2 = np.array([0, 3, 1, 2, 2, 3])
    smooth = (1 - eps) * -logp[np.arange(6), y2] + eps / 4 * -logp.sum(1)
    got = nn.CrossEntropyLoss(label_smoothing=eps, reduction="sum")(_t(x, device), _t(y2, device))
    np.testing.assert_allclose(got.item(), smooth.sum(), rtol=1e-10)
    assert "weight" in nn.CrossEntropyLoss(weight=_t(w, device)).state_dict()
    assert repr(nn.CrossEntropyLoss(ignore_index=0, label_smoothing=0.1)) == \
        "CrossEntropyLoss(ignore_index=0, label_smoothing=0.1)"


def test_nll_mse_bce_losses(device):
    x = _rand(5, 3)
    y = np.array([2, 0, 1, 1, 0])
    logp = _log_softmax(x)
    np.testing.assert_allclose(nn.NLLLoss()(_t(logp, device), _t(y, device)).item(),
                               -logp[np.arange(5), y].mean(), rtol=1e-10)
    t = _rand(5, 3, seed=1)
    np.testing.assert_allclose(nn.MSELoss()(_t(x, device), _t(t, device)).item(), ((x - t) ** 2).mean(), rtol=1e-10)
    np.testing.assert_allclose(_np(nn.MSELoss(reduction="none")(_t(x, device), _t(t, device))), (x - t) ** 2)
    z = (t > 0).astype(np.float64)
    pw = np.array([1.0, 2.0, 3.0])
    sig = 1 / (1 + np.exp(-x))
    bce = -(pw * z * np.log(sig) + (1 - z) * np.log(1 - sig))
    got = nn.BCEWithLogitsLoss(pos_weight=_t(pw, device))(_t(x, device), _t(z, device))
    np.testing.assert_allclose(got.item(), bce.mean(), rtol=1e-9)
    got = nn.BCEWithLogitsLoss(reduction="sum")(_t(x, device), _t(z, device))
    np.testing.assert_allclose(got.item(), -(z * np.log(sig) + (1 - z) * np.log(1 - sig)).sum(), rtol=1e-9)
    with pytest.raises(ValueError):
        nn.MSELoss(reduction="avg")


def test_modules_on_device_match_cpu(device):
    mg.manual_seed(0)
    cnn = nn.Sequential(nn.Conv2d(1, 3, 3, padding=1), nn.BatchNorm2d(3), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Flatten(), nn.Linear(12, 4)).double()
    blk = nn.TransformerBlock(8, 2, causal=True).double()
    emb = nn.Embedding(10, 8).double()
    x = _rand(2, 1, 4, 4)
    tok = np.array([[1, 2, 3], [4, 5, 6]])
    outs, grads = [], []
    for dev in ("cpu", device):
        cnn.to(dev)
        blk.to(dev)
        emb.to(dev)
        cnn.zero_grad()
        blk.zero_grad()
        emb.zero_grad()
        y = cnn(mg.tensor(x, device=dev))
        z = blk(emb(mg.tensor(tok, device=dev)))
        assert y.device == mg.device(dev) and z.device == mg.device(dev)
        (y.sum() + z.pow(2).sum()).backward()
        outs.append((y.detach().cpu().numpy(), z.detach().cpu().numpy()))
        grads.append([p.grad.cpu().numpy() for m in (cnn, blk, emb) for p in m.parameters()])
    for a, b in zip(outs[0], outs[1]):
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-12)
    for a, b in zip(grads[0], grads[1]):
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-12)
