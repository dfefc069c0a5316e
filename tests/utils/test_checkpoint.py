"""minigrad.utils.checkpoint: gradients identical to the plain run (float64, bit for bit), RNG replay,
selective policies, nesting, autograd.grad and hooks, and clear errors for misuse."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.errors import ArgumentError, AutogradError, InplaceModificationError
from minigrad.utils.checkpoint import (CheckpointPolicy, RecomputationError, checkpoint, checkpoint_sequential,
                                       create_selective_checkpoint_contexts)


def mlp(depth=6, width=8, dropout=0.0, device="cpu"):
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.Tanh()] + ([nn.Dropout(dropout)] if dropout else [])
    return nn.Sequential(*layers).to(device=device, dtype=mg.float64)


def grads(model, run, *inputs, seed=1):
    """Every parameter's and input's gradient after ``run().sum().backward()`` (dropout seeded)."""
    model.zero_grad(set_to_none=True)
    for t in inputs:
        t.grad = None
    mg.manual_seed(seed)
    out = run()
    out = out[0] * 2 + out[1] if isinstance(out, tuple) else out
    out.sum().backward()
    return [p.grad.numpy().copy() for p in model.parameters()] + [t.grad.numpy().copy() for t in inputs]


def assert_same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def test_mlp_gradients_identical(device):
    model = mlp(device=device)
    x = mg.randn(5, 8, dtype=mg.float64, device=device, requires_grad=True)
    assert_same(grads(model, lambda: model(x), x), grads(model, lambda: checkpoint(model, x), x))


def test_checkpoint_sequential_every_segment_count(device):
    model = mlp(depth=4, dropout=0.25, device=device)
    x = mg.randn(5, 8, dtype=mg.float64, device=device, requires_grad=True)
    ref = grads(model, lambda: model(x), x)
    for segments in range(1, len(model) + 1):
        assert_same(ref, grads(model, lambda: checkpoint_sequential(model, segments, x), x))
    assert_same(ref, grads(model, lambda: checkpoint_sequential(list(model), 3, x), x))


def test_transformer_block_with_dropout_identical():
    block = nn.TransformerBlock(16, 4, dropout=0.2, causal=True).to(dtype=mg.float64)
    block.train()
    x = mg.randn(2, 6, 16, dtype=mg.float64, requires_grad=True)
    ref = grads(block, lambda: block(x), x)
    assert_same(ref, grads(block, lambda: checkpoint(block, x), x))
    assert not np.array_equal(ref[0], grads(block, lambda: block(x), x, seed=2)[0])  # dropout is live


def test_dropout_without_rng_replay_goes_wrong():
    model = mlp(depth=2, dropout=0.5)
    x = mg.randn(5, 8, dtype=mg.float64, requires_grad=True)
    ref = grads(model, lambda: model(x), x)
    with pytest.raises(AssertionError):   # masks drawn again: the recomputed activations differ
        assert_same(ref, grads(model, lambda: checkpoint(model, x, preserve_rng_state=False), x))


def test_explicit_generator_is_replayed():
    gen = mg.Generator().manual_seed(7)
    model = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5, generator=gen), nn.Tanh()).to(dtype=mg.float64)
    x = mg.randn(5, 8, dtype=mg.float64, requires_grad=True)
    gen.manual_seed(7)
    ref = grads(model, lambda: model(x), x)
    gen.manual_seed(7)
    assert_same(ref, grads(model, lambda: checkpoint(model, x), x))
    after = gen.get_state()
    gen.manual_seed(7)
    model(x)
    assert gen.get_state() == after  # the recomputation did not advance the generator's stream


def test_tuple_outputs_and_inputs_without_grad():
    lin = nn.Linear(8, 8).to(dtype=mg.float64)
    x = mg.randn(4, 8, dtype=mg.float64, requires_grad=True)
    c = mg.randn(4, 8, dtype=mg.float64)          # no grad: a constant input

    def fn(a, b, scale=1.0):
        h = lin(a).tanh()
        return h * b * scale, (h + b).exp()
    ref = grads(lin, lambda: fn(x, c, scale=3.0), x)
    got = grads(lin, lambda: checkpoint(fn, x, c, scale=3.0), x)
    assert_same(ref, got)
    assert c.grad is None


def test_nested_checkpoints():
    model = mlp(depth=6)
    x = mg.randn(5, 8, dtype=mg.float64, requires_grad=True)

    def inner(t):
        return checkpoint(model[2:6], t)

    def outer(t):
        return model[6:](checkpoint(inner, model[:2](t)))
    ref = grads(model, lambda: model(x), x)
    assert_same(ref, grads(model, lambda: checkpoint(outer, x), x))


def test_autograd_grad_and_hooks():
    model = mlp(depth=3)
    x = mg.randn(5, 8, dtype=mg.float64, requires_grad=True)
    seen = []

    def fn(t):
        h = model[:2](t)
        h.register_hook(lambda g: seen.append(g.numpy().copy()))
        return model[2:](h)
    g_ref, = mg.autograd.grad(fn(x).sum(), [x])
    g_ck, = mg.autograd.grad(checkpoint(fn, x).sum(), [x])
    np.testing.assert_array_equal(g_ref.numpy(), g_ck.numpy())
    assert len(seen) == 2 and np.array_equal(seen[0], seen[1])   # the hook fired once per backward


def test_no_grad_is_a_plain_call():
    model = mlp(depth=2)
    x = mg.randn(5, 8, dtype=mg.float64)
    with mg.no_grad():
        out = checkpoint(model, x)
    assert not out.requires_grad
    np.testing.assert_array_equal(out.numpy(), model(x).detach().numpy())


def test_activations_are_not_kept_then_recomputed():
    calls = []
    lin = nn.Linear(8, 8).to(dtype=mg.float64)

    def fn(t):
        calls.append(1)
        return lin(t).tanh().exp()
    x = mg.randn(5, 8, dtype=mg.float64, requires_grad=True)
    y = checkpoint(fn, x)
    node = y.grad_fn
    while node is not None and not node._saved:
        node = node.next[0].node
    assert all(type(s).__name__ == "_Handle" for s in node._saved)   # handles, not arrays
    y.sum().backward()
    assert len(calls) == 2


def test_retain_graph_recomputes_again_and_backward_twice_errors():
    model = mlp(depth=2)
    x = mg.randn(5, 8, dtype=mg.float64, requires_grad=True)
    y = checkpoint(model, x).sum()
    y.backward(retain_graph=True)
    first = x.grad.numpy().copy()
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), 2 * first)
    with pytest.raises(AutogradError, match="backward through the graph a second time"):
        y.backward()


def test_inplace_modification_of_an_input_raises():
    x = mg.randn(5, 8, dtype=mg.float64, requires_grad=True)
    a = x * 1.0
    y = checkpoint(lambda t: t.exp(), a)     # exp saves its output only: the input is checked by checkpoint
    with mg.no_grad():
        a.add_(1.0)
    with pytest.raises(InplaceModificationError, match="checkpoint: input 0 .* modified in place"):
        y.sum().backward()


def test_non_tensor_outputs_raise():
    x = mg.randn(3, requires_grad=True)
    with pytest.raises(TypeError, match="checkpoint: .* holds no Tensor"):
        checkpoint(lambda t: float(t.sum().item()), x)
    out = checkpoint(lambda t: (t.exp(), "aux"), x)     # a tensor beside other values is fine
    out[0].sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp(x.detach().numpy()))


def test_nondeterministic_function_raises():
    state = {"n": 2}

    def fn(t):
        state["n"] += 1
        for _ in range(state["n"]):
            t = t.tanh()
        return t
    y = checkpoint(fn, mg.randn(3, dtype=mg.float64, requires_grad=True))
    with pytest.raises(RecomputationError, match="saved 4 tensors .* forward saved 3"):
        y.sum().backward()


def test_bad_arguments():
    model = mlp(depth=2)
    x = mg.randn(5, 8, dtype=mg.float64)
    with pytest.raises(ArgumentError, match="segments must be an int between 1 and the number of functions"):
        checkpoint_sequential(model, 5, x)
    with pytest.raises(ArgumentError, match="use_reentrant=True"):
        checkpoint(model, x, use_reentrant=True)
    with pytest.raises(TypeError, match="context_fn must return a pair"):
        checkpoint(model, x, context_fn=lambda: None)


def test_selective_policy_keeps_linear_outputs(monkeypatch):
    model = mlp(depth=3, dropout=0.3)
    x = mg.randn(5, 8, dtype=mg.float64, requires_grad=True)
    ref = grads(model, lambda: model(x), x)
    ops = {}

    def note(op, args, kwargs, run):
        ops[op.name] = op
        return run()
    with mg.autograd.extensions.forward_wrappers.added(note):
        model(x)
    ran = []
    for name in ("linear", "tanh"):      # count the real forward computations of each op
        cls = ops[name]
        monkeypatch.setattr(cls, "forward", staticmethod(
            lambda ctx, *a, _f=cls.forward, _n=name, **k: ran.append(_n) or _f(ctx, *a, **k)))
    for policy in (["linear"], lambda ctx, op, *a, **k: CheckpointPolicy.MUST_SAVE if op.name == "linear"
                   else CheckpointPolicy.PREFER_RECOMPUTE, [ops["linear"]]):
        pair = create_selective_checkpoint_contexts(policy)
        ran.clear()
        got = grads(model, lambda: checkpoint(model, x, context_fn=lambda: pair), x)
        assert ran == ["linear", "tanh"] * 3 + ["tanh"] * 3    # linear outputs replayed, tanh recomputed
        assert_same(ref, got)
    ran.clear()
    grads(model, lambda: checkpoint(model, x), x)
    assert ran == ["linear", "tanh"] * 6                       # plain checkpointing recomputes everything


def test_selective_policy_detects_mutation_of_kept_output():
    lin = nn.Linear(4, 4).to(dtype=mg.float64)
    x = mg.randn(3, 4, dtype=mg.float64, requires_grad=True)
    pair = create_selective_checkpoint_contexts(["linear"])
    kept = []

    def fn(t):
        h = lin(t)
        kept.append(h)
        return h.tanh()
    y = checkpoint(fn, x, context_fn=lambda: pair)
    with mg.no_grad():
        kept[0].mul_(2.0)
    with pytest.raises(InplaceModificationError, match="kept by the selective policy"):
        y.sum().backward()
