"""scan: a loop as one graph node (its body compiled once) equals the Python loop, values and gradients;
a Python ``for`` is unrolled by tracing instead."""
import numpy as np
import pytest

import minigrad as mg
from minigrad.compiler import GraphBreakError, scan

rng = np.random.default_rng(0)
W, U = (mg.tensor(rng.normal(size=(3, 3)) * 0.5, dtype=mg.float64, requires_grad=True) for _ in range(2))


def cell(h, x):
    h = (x @ W + h @ U).tanh()
    return h, h * 2.0


def with_scan(xs, h0):
    h, ys = scan(cell, h0, xs)
    return h.sum() + ys.sum()


def with_for(xs, h0):
    h, ys = h0, []
    for i in range(xs.shape[0]):
        h, y = cell(h, xs[i])
        ys.append(y)
    return h.sum() + mg.stack(ys).sum()


def _value_and_grads(fn, xs0, h00):
    xs, h0 = (mg.tensor(a, dtype=mg.float64, requires_grad=True) for a in (xs0, h00))
    W.grad = U.grad = None
    out = fn(xs, h0)
    out.backward()
    return [out.item(), xs.grad.numpy(), h0.grad.numpy(), W.grad.numpy(), U.grad.numpy()]


@pytest.mark.parametrize("T", [1, 5])
def test_scan_equals_the_python_loop_eager_and_compiled(T):
    c = mg.compile(with_scan)
    for _ in range(3):
        xs0, h00 = rng.normal(size=(T, 2, 3)), rng.normal(size=(2, 3))
        want = _value_and_grads(with_for, xs0, h00)
        for fn in (with_scan, c):
            for got, w in zip(_value_and_grads(fn, xs0, h00), want):
                np.testing.assert_allclose(got, w, rtol=1e-12)
    assert c.stats["replays"] == 2
    assert c.graphs()[0].op_counts()["scan"] == 1


def test_the_graph_of_a_scan_stays_one_node_a_python_for_grows_with_the_length():
    sizes = {}
    for T in (2, 8):
        xs, h0 = mg.randn(T, 2, 3, dtype=mg.float64), mg.randn(2, 3, dtype=mg.float64)
        sizes[T] = [len(mg.compile.explain(fn, xs, h0).graphs[0]) for fn in (with_scan, with_for)]
    assert sizes[2][0] == sizes[8][0] == 6                     # scan, its two outputs, two sums, add
    assert sizes[8][1] - sizes[2][1] == 6 * 6                  # getitem, matmul x2, add, tanh, mul per step


def test_a_body_reading_a_value_computed_before_the_loop_is_an_error():
    def f(xs, h0):
        scale = h0.mean() * 2.0                     # computed in the traced function
        return scan(lambda h, x: ((h + x) * scale,) * 2, h0, xs)[0]
    with pytest.raises(GraphBreakError, match="pass it in the carry or in xs"):
        mg.compile(f)(mg.randn(3, 2), mg.randn(2))


def test_scan_in_a_function_with_a_graph_break_replays_piecewise():
    def f(xs, h0):
        s = xs.abs().mean().item()
        h, ys = scan(cell, h0 * s, xs)
        return h * ys.mean().item()
    c = mg.compile(f)
    for _ in range(3):
        xs, h0 = mg.randn(4, 2, 3, dtype=mg.float64), mg.randn(2, 3, dtype=mg.float64)
        np.testing.assert_allclose(c(xs, h0).detach().numpy(), f(xs, h0).detach().numpy(), rtol=1e-12)
    assert c.stats["piecewise"] == 2 and c.stats["deopts"] == 0
