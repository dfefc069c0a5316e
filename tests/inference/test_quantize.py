import numpy as np
import pytest

import minigrad as mg
from minigrad import inference as infer
from minigrad import nn
from minigrad.errors import ArgumentError


def test_per_channel_int8_rounding():
    w = np.random.default_rng(0).standard_normal((6, 10)).astype(np.float32)
    w[3] = 0                                              # an all-zero row keeps scale 1
    q, s = infer.quantize_per_channel(w)
    assert q.dtype == np.int8 and s.shape == (6,) and np.abs(q).max() == 127 and s[3] == 1
    assert np.all(np.abs(q * s[:, None] - w) <= s[:, None] / 2 + 1e-7)   # at most half a step per weight


def test_quantize_model_memory_and_outputs(gpt_factory):
    m = gpt_factory(vocab=40, d_model=32, dtype=mg.float32)
    x = mg.randint(0, 40, (2, 9))
    with mg.no_grad():
        ref = m(x).numpy()
    linears = [mod for mod in m.modules() if isinstance(mod, (nn.Linear, nn.Embedding))]
    float_bytes = sum(mod.weight.nbytes for mod in linears)
    before = infer.weight_bytes(m)
    assert infer.quantize_(m) is m
    quant = [mod for mod in m.modules() if isinstance(mod, (infer.QuantizedLinear, infer.QuantizedEmbedding))]
    assert len(quant) == len(linears) and not any(isinstance(mod, nn.Linear) for mod in m.modules())
    int8_bytes = sum(mod.weight.nbytes + mod.weight_scale.nbytes for mod in quant)
    assert int8_bytes < 0.3 * float_bytes                 # 0.25x plus one float32 scale per row
    assert infer.weight_bytes(m) == before - float_bytes + int8_bytes
    with mg.no_grad():
        out = m(x).numpy()
    assert np.abs(out - ref).max() < 0.05 * np.abs(ref).max()
    lin = quant[-1]                                       # the forward is exactly x @ (q * s)^T + b
    h = mg.randn(3, lin.in_features)
    with mg.no_grad():
        np.testing.assert_allclose(lin(h).numpy(), (h @ lin.dequantized_weight().T + lin.bias).numpy(),
                                   rtol=1e-5, atol=1e-5)
    assert infer.generate(m, [[1, 2, 3]], 5, temperature=0).shape == (1, 8)   # the cache path works too
    sd = m.state_dict()
    assert sd["head.weight"].dtype == mg.int8 and "head.weight_scale" in sd


def test_quantize_errors():
    with pytest.raises(ArgumentError, match="parent"):
        infer.quantize_(nn.Linear(2, 2))
    with pytest.raises(ArgumentError, match="modules"):
        infer.quantize_(nn.Sequential(nn.Linear(2, 2)), modules=(nn.ReLU,))
