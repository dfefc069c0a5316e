"""float64 gradcheck of composite modules, with respect to the input and to every parameter."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.autograd import gradcheck


def _check(module, *inputs):
    module.double().to(inputs[0].device)
    params = list(module.parameters())
    n = len(inputs)
    assert gradcheck(lambda *args: module(*args[:n]), tuple(inputs) + tuple(params), eps=1e-6, atol=1e-6,
                     rtol=1e-4)


def _x(*shape, device=None):
    return mg.randn(*shape, dtype=mg.float64, requires_grad=True, device=device)


def test_gradcheck_linear(device):
    _check(nn.Linear(4, 3), _x(2, 4, device=device))


def test_gradcheck_conv2d(device):
    _check(nn.Conv2d(2, 3, 3, stride=2, padding=1), _x(2, 2, 5, 5, device=device))


def test_gradcheck_layernorm(device):
    ln = nn.LayerNorm(5)
    with mg.no_grad():
        ln.weight.normal_()
        ln.bias.normal_()
    _check(ln, _x(3, 5, device=device))


def test_gradcheck_batchnorm_training(device):
    bn = nn.BatchNorm2d(3)
    with mg.no_grad():
        bn.weight.normal_()
    _check(bn, _x(4, 3, 2, 2, device=device))
    bn1 = nn.BatchNorm1d(3).eval()
    _check(bn1, _x(4, 3, device=device))


@pytest.mark.parametrize("need_weights", [True, False])
def test_gradcheck_multihead_attention_causal(need_weights, device):
    mha = nn.MultiheadAttention(4, 2, batch_first=True)
    with mg.no_grad():
        mha.in_proj_bias.normal_()

    class Wrap(nn.Module):
        def __init__(self):
            super().__init__()
            self.mha = mha

        def forward(self, q):
            return self.mha(q, is_causal=True, need_weights=need_weights)[0]
    _check(Wrap(), _x(2, 3, 4, device=device))


def test_gradcheck_cross_attention_with_padding_mask(device):
    mha = nn.MultiheadAttention(4, 2, batch_first=True)
    kpm = mg.tensor(np.array([[False, False, True], [False, False, False]]), device=device)

    class Wrap(nn.Module):
        def __init__(self):
            super().__init__()
            self.mha = mha

        def forward(self, q, kv):
            return self.mha(q, kv, kv, key_padding_mask=kpm, need_weights=False)[0]
    _check(Wrap(), _x(2, 2, 4, device=device), _x(2, 3, 4, device=device))


def test_gradcheck_transformer_block(device):
    _check(nn.TransformerBlock(4, 2, d_ff=6, causal=True), _x(1, 3, 4, device=device))


def test_gradcheck_small_cnn(device):
    net = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.BatchNorm2d(2), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Flatten(), nn.Linear(8, 3))
    _check(net, _x(2, 1, 4, 4, device=device))
