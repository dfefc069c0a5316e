"""The core's extension points: what each registry sees, the order wrappers nest in, and that nothing is
left registered (so the hot path is back to one flag check)."""
import collections
import threading

import numpy as np
import pytest

import minigrad as mg
from minigrad.autograd import extensions


@pytest.fixture(autouse=True)
def _nothing_left_registered():
    yield
    assert not extensions.state.forward and not extensions.state.backward
    assert not extensions.input_casts and not extensions.forward_wrappers and not extensions.backward_wrappers


def test_forward_wrapper_sees_every_op_with_its_inputs_and_result():
    seen = []

    def record(op, args, kwargs, run):
        out = run()
        seen.append((op.name, [tuple(a.shape) for a in args if isinstance(a, mg.Tensor)], tuple(out.shape)))
        return out

    x = mg.randn(3, 4, requires_grad=True)
    with extensions.forward_wrappers.added(record):
        assert extensions.state.forward
        y = (x * 2).sum()
    assert [name for name, _, _ in seen] == ["mul", "sum"]
    assert seen[0][1] == [(3, 4)] and seen[0][2] == (3, 4) and seen[1][2] == ()
    y.backward()                                 # the graph recorded through the wrapper works as usual
    np.testing.assert_array_equal(x.grad.numpy(), np.full((3, 4), 2, np.float32))


def test_wrappers_nest_in_registration_order_first_outermost():
    order = []

    def make(tag):
        def wrap(op, args, kwargs, run):
            order.append(f"{tag}>")
            out = run()
            order.append(f"<{tag}")
            return out
        return wrap

    outer, inner = make("outer"), make("inner")
    h1 = extensions.forward_wrappers.add(outer)
    h2 = extensions.forward_wrappers.add(inner)
    try:
        mg.ones(2) + 1
    finally:
        h1.remove()
        h2.remove()
    assert order == ["outer>", "inner>", "<inner", "<outer"]


def test_input_cast_runs_the_op_at_another_precision_in_one_node_and_gradients_come_back_in_each_dtype():
    def half_muls(op, args, kwargs):
        return extensions.Casts(np.float16, compute=np.float32) if op.name == "mul" else None

    x = mg.tensor([1.0, 2.0], requires_grad=True)
    with extensions.input_casts.added(half_muls):
        y = x * 3.0
        z = x + 1.0                              # not cast: runs as it is
    assert y.dtype == mg.float16 and z.dtype == mg.float32
    assert y.grad_fn.name == "mul" and y.grad_fn.next[0].node is x._accumulator()   # no Cast node
    assert y.grad_fn.next[0].dtype == np.float32
    y.sum().backward()
    assert x.grad.dtype == mg.float32            # the gradient comes back in the input's dtype
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])


def test_registrations_have_names_duplicates_are_refused_and_order_is_defined():
    calls = []

    def make(tag):
        def wrap(op, args, kwargs, run):
            calls.append(tag)
            return run()
        return wrap

    a, b, c = make("a"), make("b"), make("c")
    with extensions.forward_wrappers.added(a, "first"), extensions.forward_wrappers.added(b, "second"):
        with pytest.raises(ValueError, match="'first' is already registered"):
            extensions.forward_wrappers.add(c, "first")
        with extensions.forward_wrappers.added(c, "profiler-like", outermost=True):
            assert extensions.forward_wrappers.names() == ["profiler-like", "first", "second"]
            mg.ones(1) * 2
    assert calls == ["c", "a", "b"]
    h1, h2 = extensions.forward_wrappers.add(a), extensions.forward_wrappers.add(a)   # names by default
    assert extensions.forward_wrappers.names() == [a.__qualname__, a.__qualname__ + "#2"] == [h1.name, h2.name]
    h1.remove()
    h2.remove()


def test_a_registration_belongs_to_its_thread_unless_process_wide():
    seen = collections.defaultdict(list)

    def spy(tag):
        def wrap(op, args, kwargs, run):
            seen[tag].append(threading.current_thread().name)
            return run()
        return wrap

    def other_thread():
        mg.ones(1) * 2

    with extensions.forward_wrappers.added(spy("mine"), "mine"):
        h = extensions.forward_wrappers.add(spy("everyone"), "everyone", process_wide=True)
        try:
            t = threading.Thread(target=other_thread, name="other")
            t.start()
            t.join()
            mg.ones(1) * 2
        finally:
            h.remove()
    assert seen["mine"] == ["MainThread"]
    assert sorted(seen["everyone"]) == ["MainThread", "other"]


def test_backward_wrapper_sees_each_node_and_its_gradients():
    counts = collections.Counter()

    def count(node, grad, run):
        grads = run()
        counts[node.name] += 1
        assert isinstance(grads, tuple) or hasattr(grads, "shape")
        return grads

    x = mg.randn(2, 2, requires_grad=True)
    y = (x.exp() * x).sum()
    with extensions.backward_wrappers.added(count):
        y.backward()
    assert counts == {"sum": 1, "mul": 1, "exp": 1}


def test_a_wrapper_that_raises_leaves_no_registration_behind():
    def boom(op, args, kwargs, run):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        with extensions.forward_wrappers.added(boom):
            mg.ones(1) * 2
    assert mg.ones(1).mul(2).item() == 2.0


def test_handle_remove_is_idempotent_and_registry_repr_says_its_count():
    h = extensions.backward_wrappers.add(lambda node, grad, run: run())
    assert "1 registered" in repr(extensions.backward_wrappers)
    h.remove()
    h.remove()
    assert "0 registered" in repr(extensions.backward_wrappers)


def test_graph_edges_are_named_and_still_tuples():
    x = mg.randn(3, requires_grad=True)
    y = x * 2
    edge = y.grad_fn.next[0]
    assert isinstance(edge, mg.autograd.Edge) and isinstance(edge, tuple)
    assert edge.node is x.grad_fn or edge.node is x._accumulator()
    assert edge.shape == (3,) and edge.dtype == np.float32
    node, shape, dtype = edge                    # the tuple protocol the a1 notebook teaches
    assert node is edge.node and repr(y.grad_fn) == "<Mul>"


def test_op_names_keep_acronyms_whole():
    from minigrad.autograd.function import _snake
    assert [_snake(n) for n in ("ReLU", "LeakyReLU", "XMLParse", "LogSoftmax", "Square")] == \
        ["relu", "leaky_relu", "xml_parse", "log_softmax", "square"]
