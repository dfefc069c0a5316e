"""What lecture 09 (the eager runtime) states about minigrad's behaviour holds (the notebook itself is executed
by test_notebooks.py; these are the claims its text draws from what it prints)."""
import math
import os
import sys

import numpy as np

import minigrad as mg

ROOT = os.path.dirname(mg.__file__)


def _minigrad_calls(fn):
    names = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(ROOT):
            names.append(frame.f_code.co_name)
    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return names


def test_a_multiply_goes_through_apply_and_the_ops_forward_and_saves_the_inputs_own_arrays():
    a, b = mg.randn(8, 8, requires_grad=True), mg.randn(8, 8)
    names = _minigrad_calls(lambda: a * b)
    assert "apply" in names and "forward" in names and names.index("apply") < names.index("forward")
    y = a * b
    assert type(y.grad_fn).__name__ == "Mul" and [e is None for e in y.grad_fn.next] == [False, True]
    assert all(np.shares_memory(s, t.array) for s, t in zip(y.grad_fn.saved_tensors, (a, b)))
    an, bn = a.detach().numpy(), b.numpy()
    assert not _minigrad_calls(lambda: an * bn)                            # NumPy alone: no minigrad frame


def test_inputs_that_do_not_require_grad_record_no_graph():
    a, b = mg.randn(8, 8), mg.randn(8, 8)
    assert (a * b).grad_fn is None


def test_a_captured_chain_of_elementwise_ops_replays_as_one_node_with_the_same_values_and_gradients():
    def chain(x, w):
        y = x
        for _ in range(64):
            y = y * w + x
        return y
    x, w = mg.randn(64, dtype=mg.float64, requires_grad=True), mg.randn(64, dtype=mg.float64) * 0.5
    fast = mg.compile(chain)
    fast(x, w)
    assert mg.compile.explain(chain, x, w).op_count == 128 and len(fast.graphs()[0]) == 1
    eager = chain(x, w)
    eager.sum().backward()
    g_eager, x.grad = x.grad.numpy().copy(), None
    replayed = fast(x, w)
    replayed.sum().backward()
    assert fast.stats["replays"] >= 1
    np.testing.assert_allclose(replayed.detach().numpy(), eager.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), g_eager, rtol=1e-12)


def test_the_emulated_device_computes_before_the_call_returns():
    """The lecture says the emulated 'cuda' device is synchronous (its arrays are NumPy arrays)."""
    if not mg.cuda.is_available() or not mg.cuda.is_emulated():
        return
    x = mg.randn(4, 4, device="cuda")
    y = x @ x
    assert type(y.array) is np.ndarray and math.isfinite(y.sum().item())
