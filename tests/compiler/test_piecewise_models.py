"""Piecewise replay of models: transformer blocks and a tiny GPT with a ``.item()`` break equal eager
(float64 losses and parameter gradients), with and without dropout."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.compiler import FusedElementwise
from minigrad.examples.tiny_gpt import TinyGPT, lm_loss


class _BlockWithItem(nn.Module):
    """Two transformer blocks with a Python decision on a value in the middle (a gradient-free rescale)."""

    def __init__(self, d=16, dropout=0.0):
        super().__init__()
        self.b1 = nn.TransformerBlock(d, 2, causal=True, activation="gelu_tanh", dropout=dropout)
        self.norm = nn.LayerNorm(d)
        self.b2 = nn.TransformerBlock(d, 2, causal=False, activation="gelu", dropout=dropout)
        self.act = nn.GELU(approximate="tanh")

    def forward(self, x):
        h = self.b1(x)
        scale = h.pow(2.0).mean().item()      # graph break in the middle
        h = self.act(self.norm(h)) * (1.0 / (1.0 + scale))
        return self.b2(h)


def _model_step(model, x, params=None):
    params = list((model if params is None else params).parameters())
    for p in params:
        p.grad = None
    out = model(x)
    loss = out if out.ndim == 0 else (out * x).sin().sum()
    loss.backward()
    return loss.item(), [p.grad.numpy().copy() for p in params]


def test_transformer_block_with_an_item_break_replays_piecewise_equal_to_eager():
    mg.manual_seed(0)
    model = _BlockWithItem().double()
    c = mg.compile(model)
    for _ in range(3):
        x = mg.randn(2, 5, 16, dtype=mg.float64)
        loss, grads = _model_step(c, x)
        eager_loss, eager_grads = _model_step(model, x)
        assert loss == pytest.approx(eager_loss, rel=1e-11)
        for a, b in zip(grads, eager_grads):
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    assert c.stats == {"traces": 1, "replays": 0, "eager": 0, "piecewise": 2, "deopts": 0}
    assert sum(n.target is FusedElementwise for g in c.graphs() for n in g.nodes) >= 1


def test_transformer_dropout_piecewise_draws_as_eager():
    mg.manual_seed(0)
    model = _BlockWithItem(dropout=0.1).double()
    c = mg.compile(model)
    x = mg.randn(2, 5, 16, dtype=mg.float64)
    c(x)
    for seed in (5, 6):
        mg.manual_seed(seed)
        loss, grads = _model_step(c, x)
        mg.manual_seed(seed)
        eager_loss, eager_grads = _model_step(model, x)
        assert loss == pytest.approx(eager_loss, rel=1e-11)
        for a, b in zip(grads, eager_grads):
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    assert c.stats["piecewise"] == 2 and c.stats["deopts"] == 0


def test_tiny_gpt_step_with_an_item_break_replays_piecewise_without_deopt(capsys):
    mg.manual_seed(0)
    gpt = TinyGPT(vocab_size=11, block_size=8, d_model=16, n_layer=2, n_head=2).double()
    targets = mg.randint(0, 11, (2, 8))

    def step(idx):
        logits = gpt(idx)
        loss = lm_loss(logits, targets)   # cross_entropy validates target.array: read mid-piece, no deopt
        v = loss.item()
        print(f"loss {v:.6f}")
        return loss * (2.0 if v > 0 else 1.0) + logits.pow(2).mean() * v
    c = mg.compile(step)
    for _ in range(3):
        idx = mg.randint(0, 11, (2, 8))
        loss, grads = _model_step(c, idx, gpt)
        eager_loss, eager_grads = _model_step(step, idx, gpt)
        assert loss == pytest.approx(eager_loss, rel=1e-11)
        for a, b in zip(grads, eager_grads):
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    assert c.stats == {"traces": 1, "replays": 0, "eager": 0, "piecewise": 2, "deopts": 0}
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 6 and lines[2] == lines[3] and lines[0] != lines[2]   # printed every call
