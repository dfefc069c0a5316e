"""Graph passes: constant folding, CSE and DCE leave results (values, float64 gradients, random draws)
unchanged, and ``explain`` reports the op count after each."""
import numpy as np
import pytest

import minigrad as mg
import minigrad.nn.functional as F
from minigrad.compiler import eliminate_common_subexpressions, eliminate_dead_code, fold_constants


def masked(x, w):
    T = x.shape[0]
    mask = ~mg.ones(T, T, dtype=mg.bool).tril()        # constant: folded once
    pos = mg.arange(T, dtype=mg.float64) * 0.5           # constant
    e = (x @ w).exp()
    again = (x @ w).exp()                                # the same value twice: CSE
    unused = (x * 3.0).sin()                             # nobody reads it: DCE  # noqa: F841
    return (e * again).masked_fill(mask, 0.0) + pos


def _value_and_grads(fn, x0, w0):
    x, w = (mg.tensor(a, dtype=mg.float64, requires_grad=True) for a in (x0, w0))
    out = fn(x, w)
    out.sum().backward()
    return out.detach().numpy(), x.grad.numpy(), w.grad.numpy()


def test_passes_keep_values_and_gradients_and_remove_what_they_should():
    c = mg.compile(masked, fuse=False)
    rng = np.random.default_rng(0)
    for _ in range(3):
        x0, w0 = rng.normal(size=(4, 4)) * 0.3, rng.normal(size=(4, 4)) * 0.3
        for got, want in zip(_value_and_grads(c, x0, w0), _value_and_grads(masked, x0, w0)):
            np.testing.assert_allclose(got, want, rtol=1e-12)
    assert c.stats["replays"] == 2
    g = c.graphs()[0]
    counts = g.passes
    assert counts["traced"] == 14
    # ones, tril, ~ (the mask) and arange, * 0.5: five calls folded into two constants
    assert counts["traced"] - counts["constant folding"] == 5
    assert counts["constant folding"] - counts["cse"] == 2        # the second matmul and exp
    assert counts["cse"] - counts["dce"] == 2                     # x * 3.0 and its sin
    assert sorted(g.op_counts()) == ["add", "exp", "masked_fill", "matmul", "mul"]
    assert sum(n.meta.get("constant", False) for n in g.nodes) == 2


def test_explain_reports_the_op_count_after_each_pass():
    text = str(mg.compile.explain(masked, mg.randn(4, 4), mg.randn(4, 4)))
    assert "graph_0: 14 ops" in text and "after constant folding 9, cse 7, dce 5; after fusion 4" in text


def test_optimize_false_replays_the_traced_graph():
    c = mg.compile(masked, fuse=False, optimize=False)
    x, w = mg.randn(4, 4), mg.randn(4, 4)
    c(x, w)
    np.testing.assert_allclose(c(x, w).numpy(), masked(x, w).numpy(), rtol=1e-6)
    assert len(c.graphs()[0]) == 14 and c.graphs()[0].passes == {}


def test_random_ops_are_never_folded_merged_or_removed():
    def f(x):
        a = F.dropout(x, 0.5)
        b = F.dropout(x, 0.5)                        # same inputs, different draws: not one value
        F.dropout(x, 0.5)                            # dead, but it advances the random stream
        noise = mg.randn(3, dtype=mg.float64)        # no tensor inputs, but not a constant
        return a + b + noise
    c = mg.compile(f)
    x = mg.ones(3, dtype=mg.float64)
    c(x)
    for seed in (1, 2):
        mg.manual_seed(seed)
        got, after = c(x).numpy(), mg.rand(1).item()
        mg.manual_seed(seed)
        np.testing.assert_array_equal(got, f(x).numpy())
        assert after == mg.rand(1).item()
    assert c.graphs()[0].passes["traced"] == c.graphs()[0].passes["dce"] == 6


def test_values_returned_or_changing_inputs_are_not_touched():
    def f(x):
        buf = mg.zeros(3, dtype=mg.float64)          # returned: the caller may change it, so not folded
        return x + 1.0, x + 1.0, buf                 # both returned: not merged into one tensor
    c = mg.compile(f)
    x = mg.ones(3, dtype=mg.float64)
    c(x)
    a, b, buf = c(x)
    assert a is not b and len(c.graphs()[0].op_counts()) == 2
    buf.add_(1.0)
    np.testing.assert_array_equal(c(x)[2].numpy(), [0.0, 0.0, 0.0])


def test_each_pass_on_a_hand_built_graph():
    c = mg.compile(masked, fuse=False, optimize=False)
    x, w = mg.randn(4, 4), mg.randn(4, 4)
    c(x, w)
    g = c.graphs()[0].copy()
    eliminate_dead_code(g)
    assert len(g) == 12
    eliminate_common_subexpressions(g)
    assert len(g) == 10                  # merged duplicates are removed by CSE itself
    fold_constants(g)
    eliminate_dead_code(g)
    assert len(g) == 5
    np.testing.assert_allclose(g([x, w]).numpy(), masked(x, w).numpy(), rtol=1e-6)


@pytest.mark.parametrize("fuse", [False, True])
def test_passes_inside_piecewise_pieces(fuse):
    def f(x):
        a = (x * 2.0).exp()
        b = (x * 2.0).exp()
        s = a.sum().item()
        return a * b * s
    c = mg.compile(f, fuse=fuse)
    for k in range(3):
        x = mg.randn(5, dtype=mg.float64) * (k + 1)
        np.testing.assert_allclose(c(x).numpy(), f(x).numpy(), rtol=1e-12)
    assert c.stats["piecewise"] == 2 and c.stats["deopts"] == 0
