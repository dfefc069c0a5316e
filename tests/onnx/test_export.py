"""minigrad.onnx.export, checked by running the file with onnxruntime against minigrad's outputs."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.nn import functional as F

ort = pytest.importorskip("onnxruntime")
mo = pytest.importorskip("minigrad.onnx")


def _run(model, inputs, tmp_path, **kw):
    path = tmp_path / "model.onnx"
    proto = mo.export(model, inputs, path, **kw)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = sess.run(None, {i.name: x.numpy() for i, x in zip(sess.get_inputs(), inputs)})
    with mg.no_grad():
        ref = model(*inputs)
    ref = ref if isinstance(ref, tuple) else (ref,)
    return proto, sess, got, [r.numpy() for r in ref]


def test_mlp(tmp_path):
    model = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 3))
    proto, sess, got, ref = _run(model, (mg.randn(5, 6),), tmp_path, input_names=["x"], output_names=["logits"])
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-5, atol=1e-6)
    assert [i.name for i in sess.get_inputs()] == ["x"] and [o.name for o in sess.get_outputs()] == ["logits"]
    assert {n.op_type for n in proto.graph.node} >= {"MatMul", "Add", "Erf", "Tanh"}


def test_cnn(tmp_path):
    from minigrad.examples.digits_cnn import build_cnn
    model = build_cnn(channels=8).eval()                 # the demo's CNN (conv, batch norm, pooling, dropout)
    x = mg.randn(3, 1, 8, 8)
    _, _, got, ref = _run(model, (x,), tmp_path)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-4, atol=1e-5)


def test_tiny_gpt_forward(tmp_path):
    from minigrad.examples.tiny_gpt import TinyGPT
    model = TinyGPT(30, 16, d_model=32, n_layer=2, n_head=4).eval()
    idx = mg.randint(0, 30, (2, 11))
    proto, _, got, ref = _run(model, (idx,), tmp_path)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-4, atol=1e-5)
    assert any(n.op_type == "LayerNormalization" for n in proto.graph.node)


def test_functions_and_more_ops(tmp_path):
    def f(x, y):
        a = F.softmax(x, dim=-1) + F.log_softmax(x, dim=0) - x * 2.0 / 3.0
        b = mg.cat([x.permute(1, 0), y.transpose(0, 1)], dim=1).mean(dim=1, keepdim=True)
        c = F.sigmoid(x) * F.silu(y) + (x * x).sqrt() - (-x).exp() + x ** 2 + F.leaky_relu(x, 0.1)
        d = F.avg_pool2d(x.reshape(1, 1, 3, 4), 2, 1).sum() + F.adaptive_avg_pool2d(x.reshape(1, 1, 3, 4), 1).sum()
        mask = mg.ones(3, 3, dtype="bool").tril()
        e = F.scaled_dot_product_attention(x.unsqueeze(0), y.unsqueeze(0), y.unsqueeze(0), attn_mask=mask)
        return a + c + d, b, x[:, 1:3], x[0], e
    x, y = mg.randn(3, 4), mg.randn(3, 4)
    _, _, got, ref = _run(f, (x, y), tmp_path)
    assert len(got) == 5
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5)


def test_unsupported_op_and_graph_break_are_named(tmp_path):
    def uses_cumsum(x):
        return x.cumsum(dim=0) + 1

    with pytest.raises(mo.UnsupportedOpError, match="'cumsum'.*test_export.py"):
        mo.export(uses_cumsum, (mg.randn(3),), tmp_path / "a.onnx")

    def reads_a_value(x):
        return x * 2 if x.sum().item() > 0 else x

    with pytest.raises(mo.CaptureError, match="one graph"):
        mo.export(reads_a_value, (mg.randn(3),), tmp_path / "b.onnx")
    with pytest.raises(ValueError, match="example_inputs"):
        mo.export(uses_cumsum, (3,), None)
    assert not (tmp_path / "a.onnx").exists()
