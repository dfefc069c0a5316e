"""mg.compile: replay equals eager (values and float64 gradients), guards, the graph cache, modules."""
import threading
import warnings

import numpy as np
import pytest

import minigrad as mg
import minigrad.nn.functional as F
from minigrad import nn
from minigrad.compiler import FusedElementwise
from minigrad.examples.tiny_gpt import TinyGPT, lm_loss


def _run(model, x, loss_fn):
    for p in model.parameters():
        p.grad = None
    loss = loss_fn(model(x))
    loss.backward()
    return loss.item(), [p.grad.numpy().copy() for p in model.parameters()]


def _same_as_eager(model, make_x, loss_fn, calls=3):
    compiled = mg.compile(model)
    for _ in range(calls):
        x = make_x()
        eager_loss, eager_grads = _run(model, x, loss_fn)
        loss, grads = _run(compiled, x, loss_fn)
        assert loss == pytest.approx(eager_loss, rel=1e-12, abs=1e-12)
        for a, b in zip(eager_grads, grads):
            np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-12)
    return compiled


def test_mlp_replay_equals_eager_values_and_gradients():
    mlp = nn.Sequential(nn.Linear(8, 16), nn.GELU(approximate="tanh"), nn.Linear(16, 16), nn.SiLU(),
                        nn.Linear(16, 4)).double()
    c = _same_as_eager(mlp, lambda: mg.randn(5, 8, dtype=mg.float64), lambda y: (y * y).mean())
    assert c.stats == {"traces": 1, "replays": 2, "eager": 0, "piecewise": 0, "deopts": 0}
    assert c.graphs()[0].op_counts()["linear"] == 3


def test_cnn_replay_equals_eager_and_updates_batchnorm_running_stats():
    def make():
        mg.manual_seed(1)
        return nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(64, 3)).double()
    model = make()
    compiled = _same_as_eager(model, lambda: mg.randn(2, 2, 8, 8, dtype=mg.float64), lambda y: y.square().sum())
    assert compiled.stats == {"traces": 1, "replays": 2, "eager": 0, "piecewise": 0, "deopts": 0}
    eager, twin = make(), make()
    twin_c = mg.compile(twin)
    for _ in range(3):   # the running statistics are updated inside the recorded batch_norm op: replayed too
        x = mg.randn(2, 2, 8, 8, dtype=mg.float64)
        eager(x), twin_c(x)
    np.testing.assert_allclose(twin[1].running_mean.numpy(), eager[1].running_mean.numpy(), rtol=1e-12)
    np.testing.assert_allclose(twin[1].running_var.numpy(), eager[1].running_var.numpy(), rtol=1e-12)


def test_transformer_block_and_tiny_gpt_replay_equal_eager():
    block = nn.TransformerBlock(16, 2, causal=True, activation="gelu_tanh").double()
    _same_as_eager(block, lambda: mg.randn(2, 6, 16, dtype=mg.float64), lambda y: (y * y.sin()).sum())
    gpt = TinyGPT(vocab_size=11, block_size=8, d_model=16, n_layer=2, n_head=2).double()
    targets = mg.randint(0, 11, (2, 8))
    c = _same_as_eager(gpt, lambda: mg.randint(0, 11, (2, 8)), lambda y: lm_loss(y, targets))
    assert c.stats["replays"] == 2 and c.stats["eager"] == 0
    traced = next(iter(c.cache.values())).graphs[0]
    assert traced.op_counts()["arange"] == 1       # mg.arange(T) in forward is recorded as a call...
    replayed = c.graphs()[0]                       # ...that constant folding runs once (T is guarded)
    assert "arange" not in replayed.op_counts() and replayed.passes["constant folding"] < replayed.passes["traced"]


def test_guards_retrace_on_new_shapes_dtypes_grad_mode_and_training():
    calls = []

    @mg.compile
    def f(x):
        calls.append(1)   # Python side effects happen only while tracing
        return (x * 2).sum()
    x = mg.randn(3, 4)
    f(x), f(x)
    assert f.stats["traces"] == 1 and len(calls) == 1
    f(mg.randn(5, 4))
    f(x.double())
    with mg.no_grad():
        f(x)
    f(x.requires_grad_())
    assert f.stats["traces"] == 5 and f.stats["replays"] == 1
    assert f(mg.randn(5, 4) + 1).item() > 0 and f.stats["replays"] == 2

    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    cm = mg.compile(model)
    cm(x), cm(x)
    cm.eval()
    y1, y2 = cm(x), cm(x)
    assert cm.stats["traces"] == 2
    np.testing.assert_array_equal(y1.detach().numpy(), y2.detach().numpy())   # eval: no dropout


def test_the_same_tensor_passed_twice_is_a_guard_of_its_own():
    f = mg.compile(lambda a, b: a * 2 + b)
    x, y = mg.ones(3), mg.full((3,), 5.0)
    np.testing.assert_array_equal(f(x, x).numpy(), [3, 3, 3])
    np.testing.assert_array_equal(f(x, y).numpy(), [7, 7, 7])   # not the graph traced for f(x, x)
    assert f.stats["traces"] == 2


def test_cache_size_limit_falls_back_to_eager_with_a_warning():
    f = mg.compile(lambda x: x + 1, cache_size_limit=2)
    f(mg.randn(1)), f(mg.randn(2))
    with pytest.warns(RuntimeWarning, match="cache_size_limit=2"):
        out = f(mg.randn(3))
    np.testing.assert_array_equal(out.shape, (3,))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f(mg.randn(4))   # warned once only
    assert f.stats == {"traces": 2, "replays": 0, "eager": 2, "piecewise": 0, "deopts": 0}


def test_randomness_and_tensors_made_outside_apply_are_recomputed_on_replay():
    @mg.compile
    def f(x):
        noise = mg.randn(*x.shape)                  # a library call: a node, so fresh noise every call
        mask = x > 0                                 # computed outside Function.apply: still a node
        return x * mask + noise, F.dropout(x, 0.5), x.detach() * 2
    x = mg.randn(64)
    a, b = f(x), f(x)
    assert not np.allclose(a[0].numpy(), b[0].numpy())
    assert not np.array_equal(a[1].numpy(), b[1].numpy())
    x2 = mg.randn(64)
    np.testing.assert_allclose(f(x2)[2].numpy(), x2.numpy() * 2)   # detach reads the new input


def test_replayed_parameters_are_live_and_backward_flows():
    lin = nn.Linear(3, 2)
    c = mg.compile(lin)
    x = mg.randn(4, 3)
    c(x)
    with mg.no_grad():
        lin.weight.mul_(0)
        lin.bias.fill_(1.0)
    np.testing.assert_array_equal(c(x).detach().numpy(), np.ones((4, 2), np.float32))
    c(x).sum().backward()
    np.testing.assert_allclose(lin.weight.grad.numpy(), np.tile(x.numpy().sum(0), (2, 1)), rtol=1e-6)


def test_fused_chain_in_a_compiled_function_and_its_gradients():
    def f(x, b):
        return ((x + b) * 0.5).tanh().exp() * x
    x = mg.randn(6, 5, dtype=mg.float64, requires_grad=True)
    b = mg.randn(5, dtype=mg.float64, requires_grad=True)
    c = mg.compile(f)
    c(x, b)
    graph = c.graphs()[0]
    assert [n.target for n in graph.calls()] == [FusedElementwise]
    out = c(x, b)
    out.sum().backward()
    gx, gb = x.grad.numpy().copy(), b.grad.numpy().copy()
    x.grad = b.grad = None
    f(x, b).sum().backward()
    np.testing.assert_allclose(out.detach().numpy(), f(x, b).detach().numpy(), rtol=1e-13)
    np.testing.assert_allclose(gx, x.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gb, b.grad.numpy(), rtol=1e-12)   # (5,): un-broadcast by the engine
    assert mg.autograd.gradcheck(lambda x, b: c(x, b), (x, b))


def test_print_readable_generated_code_and_draw(tmp_path):
    import matplotlib
    matplotlib.use("Agg")
    mlp = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    c = mg.compile(mlp, fuse=False)
    c(mg.randn(3, 4))
    g = c.graphs()[0]
    text = g.print_readable(print_output=False)
    lines = text.splitlines()
    assert lines[0].startswith("graph_0(") and "f32[3, 4]" in lines[0]
    assert sum("= linear(" in line for line in lines) == 2 and lines[-1].strip().startswith("return")
    assert "0_weight" in text   # parameters are named by their module path
    assert "del " in g.code     # values are freed after their last use
    ax = g.draw(ax=_axes())
    assert len([t for t in ax.texts if t.get_bbox_patch() is not None]) == len(g.nodes)
    g.draw(path=str(tmp_path / "g.png"), ax=_axes())
    assert (tmp_path / "g.png").stat().st_size > 0


def _axes():
    import matplotlib.pyplot as plt
    return plt.subplots()[1]


def test_two_threads_trace_and_replay_at_once_without_seeing_each_others_ops():
    gate = threading.Barrier(2, timeout=30)

    def f(x):
        y = (x * 2.0).tanh()
        gate.wait()                  # the other thread runs its own ops and compiled calls here...
        gate.wait()
        return y * y.sum().item()    # ...and this call has a graph break: later calls replay piecewise
    c = mg.compile(f, fuse=False)
    other = mg.compile(lambda a: (a + 1.0).exp() * 3.0, fuse=False)
    seen = []

    def neighbour():
        for _ in range(3):
            gate.wait()
            a = mg.ones(4)
            seen.append(((a - 0.5).sin().numpy(), other(a).numpy()))
            gate.wait()
    t = threading.Thread(target=neighbour)
    t.start()
    x = mg.randn(3, dtype=mg.float64)
    results = [c(x).numpy() for _ in range(3)]
    t.join()
    for r in results:
        np.testing.assert_allclose(r, f_eager(x), rtol=1e-12)
    for s, o in seen:
        np.testing.assert_allclose(s, np.sin(np.full(4, 0.5)), rtol=1e-6)
        np.testing.assert_allclose(o, np.exp(np.full(4, 2.0)) * 3, rtol=1e-6)
    assert c.stats == {"traces": 1, "replays": 0, "eager": 0, "piecewise": 2, "deopts": 0}
    assert next(iter(c.cache.values())).graphs[0].op_counts() == {"mul": 1, "tanh": 1, "sum": 1}
    assert other.stats["traces"] == 1 and other.graphs()[0].op_counts() == {"add": 1, "exp": 1, "mul": 1}


def f_eager(x):
    y = np.tanh(x.numpy() * 2.0)
    return y * y.sum()


def test_a_stand_in_answers_its_metadata_and_names_itself_for_anything_else():
    from minigrad.compiler.replay import Unevaluated
    seen = {}

    def f(x):
        h = (x * 2.0).tanh()
        if seen.get("look"):
            seen["data"] = h.array
            seen["meta"] = (h.shape, h.dtype, h.is_contiguous(), h.requires_grad, h.is_leaf)
        return (h * 3.0).sum() * x.sum().item()
    c = mg.compile(f)
    x = mg.randn(4, dtype=mg.float64, requires_grad=True)
    c(x)
    seen["look"] = True
    c(x)
    assert isinstance(seen["data"], Unevaluated)
    assert seen["meta"] == ((4,), mg.float64, True, True, False)
    with pytest.raises(RuntimeError, match=r"mg.compile: tanh \(f64\[4\], test_capture.py.*\.array\.min"):
        seen["data"].min()
