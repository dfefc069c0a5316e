"""Piecewise replay: functions with graph breaks run their Python every call, their tensors come from the
compiled pieces; off the traced path they deoptimise to eager with the same values, gradients and draws."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import minigrad as mg
import minigrad.nn.functional as F
from minigrad import nn
from minigrad.compiler import FusedElementwise
from minigrad.ops import elementwise as E, reduce as R
from minigrad.ops.nn import activation as A


def _leaves(*arrays):
    return [mg.tensor(a, dtype=mg.float64, requires_grad=True) for a in arrays]


def _value_and_grads(fn, arrays, **kwargs):
    """(output value, gradient of each input) of ``fn`` on fresh float64 leaves."""
    leaves = _leaves(*arrays)
    out = fn(*leaves, **kwargs)
    (out * out).sum().backward()
    return out.detach().numpy().copy(), [t.grad.numpy().copy() for t in leaves]


def _assert_same(a, b, rtol=1e-11):
    np.testing.assert_allclose(a[0], b[0], rtol=rtol, atol=1e-12)
    for ga, gb in zip(a[1], b[1]):
        np.testing.assert_allclose(ga, gb, rtol=rtol, atol=1e-12)


class _Spy:
    """Counts the ops whose ``forward`` really ran (a matched op of a piecewise call must not run)."""

    def __init__(self, monkeypatch, *ops):
        self.counts = dict.fromkeys(ops, 0)
        for op in ops:
            monkeypatch.setattr(op, "forward", staticmethod(self._counting(op, op.forward)))

    def _counting(self, op, forward):
        def run(ctx, *args, **kwargs):
            self.counts[op] += 1
            return forward(ctx, *args, **kwargs)
        return run


def four_breaks(x, w, log):
    h = ((x @ w).tanh() * 2.0 + 1.0).exp()    # matmul, then a fused chain
    if h.mean() > 0.5:                         # break 1: bool(tensor)
        h = h * 0.5
    s = h.sum().item()                         # break 2: .item()
    log.append(s)
    arr = (h.detach() * 2.0).numpy()           # break 3: .numpy()
    print("row:", h[0])                        # break 4: printing a tensor
    return (h.sin() * float(arr.mean()) + h * s).sigmoid()


def test_breaks_replay_piecewise_equal_to_eager_every_call(monkeypatch, capsys):
    log = []
    c = mg.compile(lambda x, w: four_breaks(x, w, log))
    rng = np.random.default_rng(0)
    w0 = rng.normal(size=(4, 3)) * 0.3
    for call in range(4):
        x0 = rng.normal(size=(5, 4))
        eager = _value_and_grads(four_breaks, [x0, w0], log=[])
        if call == 1:   # a replayed call: fused kernels run, the ops Python called were not run again
            spy = _Spy(monkeypatch, FusedElementwise, E.Mul, E.Exp, A.Tanh, R.Sum)
        got = _value_and_grads(c, [x0, w0])
        if call == 1:
            assert spy.counts[FusedElementwise] >= 2 and spy.counts[A.Tanh] == spy.counts[E.Exp] == 0
            assert spy.counts[R.Sum] == 2        # h.sum() once, in its compiled piece; the loss's sum
            monkeypatch.undo()
        _assert_same(got, eager)
        assert log[-1] == pytest.approx(eager_sum(x0, w0), rel=1e-12)   # Python read the real value
    assert c.stats == {"traces": 1, "replays": 0, "eager": 0, "piecewise": 3, "deopts": 0}
    assert capsys.readouterr().out.count("row:") == 8   # the print ran on every call, eager and compiled
    assert len(log) == 4 and len(set(log)) == 4


def eager_sum(x0, w0):
    h = np.exp(np.tanh(x0 @ w0) * 2 + 1)
    return float((h * 0.5 if h.mean() > 0.5 else h).sum())


def test_item_values_flow_into_later_ops_without_deopt():
    def f(x):
        s = x.abs().mean().item()
        return (x * s + s).relu()
    c = mg.compile(f)
    for k in range(4):
        x = mg.randn(3, 5, dtype=mg.float64) * (k + 1)
        np.testing.assert_allclose(c(x).numpy(), f(x).numpy(), rtol=1e-12)
    assert c.stats["piecewise"] == 3 and c.stats["deopts"] == 0
    graph = c.graphs()[-1]
    assert [n.name for n in graph.placeholders] == ["x", "mul_arg1", "add_arg1"]   # the floats became inputs


_STEPS = [lambda t: t.tanh(), lambda t: t * 1.5, lambda t: t + 0.25, lambda t: t.sin(), lambda t: t.sigmoid(),
          lambda t: t * t, lambda t: (t * 0.1).exp(), lambda t: t.sum(dim=-1, keepdim=True) - t]


@settings(max_examples=25, deadline=None)
@given(steps=st.lists(st.integers(0, len(_STEPS) - 1), min_size=2, max_size=8), cut=st.integers(0, 7),
       seed=st.integers(0, 2 ** 16))
def test_random_chains_with_a_break_and_python_branches_equal_eager(steps, cut, seed):
    def f(x):
        h = x
        for k, i in enumerate(steps):
            if k == cut % len(steps):
                s = h.mean().item()
                h = h * s if s > 0 else h - s       # Python control flow on the value read
            h = _STEPS[i](h)
        return h
    c = mg.compile(f)
    rng = np.random.default_rng(seed)
    for _ in range(4):
        x0 = rng.normal(size=(3, 4))
        with np.errstate(over="ignore", invalid="ignore"):   # a random chain may overflow: both sides alike
            _assert_same(_value_and_grads(c, [x0]), _value_and_grads(f, [x0]), rtol=1e-10)
    assert c.stats["traces"] == 1 and c.stats["piecewise"] + c.stats["eager"] == 3


def sign_branch(x):
    y = x * 3.0
    if y.sum() > 0:
        z = (y * y).tanh()
    else:
        z = y.exp() - 1.0
    return z.mean() + z.sum().item() * y


def test_a_branch_the_trace_did_not_see_deoptimises_with_correct_values_and_grads():
    c = mg.compile(sign_branch)
    rng = np.random.default_rng(1)
    for sign in (1, 1, -1, 1, -1):
        x0 = sign * np.abs(rng.normal(size=(2, 3)))
        _assert_same(_value_and_grads(c, [x0]), _value_and_grads(sign_branch, [x0]))
    assert c.stats == {"traces": 1, "replays": 0, "eager": 0, "piecewise": 4, "deopts": 2}


def test_deopts_in_a_row_stop_piecewise_replay():
    c = mg.compile(sign_branch)
    c(mg.ones(2))
    for _ in range(3):
        np.testing.assert_allclose(c(-mg.ones(2)).numpy(), sign_branch(-mg.ones(2)).numpy(), rtol=1e-6)
    assert c.stats["deopts"] == 2 and c.stats["eager"] == 1
    assert "deoptimised 2 calls in a row" in next(iter(c.cache.values())).why_eager


def _flagged(flag, late):
    def f(x):
        h = (x * 2.0).tanh()            # h lives only inside the fused kernel of the traced path
        if flag[0] and not late:
            print("h:", h)              # mid-piece: h is computed eagerly, the piece still runs compiled
        y = (h * 3.0).sum()
        s = y.item()
        if flag[0] and late:
            print("h:", h)              # its piece already ran: h is recomputed from the piece's inputs
        return (x * s).sin()
    return f


@pytest.mark.parametrize("late", [False, True])
def test_reading_a_fused_away_value_off_the_traced_path(late, capsys):
    flag = [False]
    f = _flagged(flag, late)
    c = mg.compile(f)
    x0 = np.linspace(-1, 1, 6).reshape(2, 3)
    c(*_leaves(x0))
    flag[0] = True
    for _ in range(2):
        _assert_same(_value_and_grads(c, [x0]), _value_and_grads(f, [x0]))
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if ln.startswith("h:")]
    assert len(lines) == 4 and lines[0].split("grad_fn")[0] == lines[1].split("grad_fn")[0]
    assert c.stats["deopts"] == 0 and c.stats["piecewise"] == 2


def test_reading_a_random_value_mid_piece_deoptimises_and_draws_as_eager():
    flag = [False]

    def f(x):
        h = F.dropout(x * 2.0, 0.5).tanh()
        if flag[0]:
            print("h:", h)              # computing h alone would draw its mask twice: deopt
        return (h * 3.0 + F.dropout(h, 0.5)).sum() * x.sum().item()
    c = mg.compile(f)
    x0 = np.linspace(0.5, 1, 16)
    c(*_leaves(x0))
    flag[0] = True
    mg.manual_seed(9)
    got = _value_and_grads(c, [x0])
    mg.manual_seed(9)
    _assert_same(got, _value_and_grads(f, [x0]))
    assert c.stats["deopts"] == 1


def test_a_stand_in_stored_by_python_is_computed_before_the_call_returns():
    kept = []

    def f(x):
        h = (x * 2.0).tanh()
        kept.append(h)
        return (h * 3.0).sum() * x.sum().item()
    c = mg.compile(f)
    x = mg.randn(4, dtype=mg.float64, requires_grad=True)
    c(x)
    out = c(x)
    np.testing.assert_allclose(kept[-1].detach().numpy(), np.tanh(2 * x.detach().numpy()), rtol=1e-12)
    (kept[-1].sum() + out).backward()   # autograd runs through the recomputed value too
    s = x.detach().numpy().sum()
    t = np.tanh(2 * x.detach().numpy())
    expected = (1 - t * t) * 2 * (1 + 3 * s)   # .item() is a constant to autograd
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-10)


def _dropout_fn(flag):
    def f(x):
        h = F.dropout(x * 2.0, 0.5) + 1.0
        if flag[0]:
            print("h:", h.shape)        # metadata only: no deopt
            h = h * 1.0 if (h.sum() > -1e9) else h   # an extra host read on h mid-piece: deopt
        a = F.dropout(h.tanh(), 0.3)
        s = a.sum().item()
        b = F.dropout(a * s, 0.2)
        return b * (b.mean() > 0)
    return f


@pytest.mark.parametrize("deopt", [False, True])
def test_dropout_in_piecewise_calls_draws_as_eager_with_the_same_seed(deopt, capsys):
    flag = [False]
    f = _dropout_fn(flag)
    c = mg.compile(f)
    x0 = np.random.default_rng(2).normal(size=(8, 8))
    c(*_leaves(x0))
    flag[0] = deopt
    for seed in (3, 4):
        mg.manual_seed(seed)
        got = _value_and_grads(c, [x0])
        after = mg.rand(1).item()
        mg.manual_seed(seed)
        _assert_same(got, _value_and_grads(f, [x0]))
        assert after == mg.rand(1).item()   # the random stream advanced exactly as in eager mode
    assert c.stats["deopts"] == (2 if deopt else 0)


def test_dropout_value_recomputed_after_its_piece_ran_has_the_compiled_mask():
    kept = []

    def f(x):
        h = F.dropout(x * 2.0, 0.5).exp()
        kept.append(h)   # fused away, stored: recomputed with the random state the piece ran with
        return h.sum() * x.sum().item()
    c = mg.compile(f)
    x = mg.ones(64, dtype=mg.float64)
    c(x)
    mg.manual_seed(7)
    out = c(x)
    mg.manual_seed(7)
    np.testing.assert_allclose(kept[-1].numpy(), F.dropout(x * 2.0, 0.5).exp().numpy(), rtol=1e-12)
    np.testing.assert_allclose(out.item(), kept[-1].numpy().sum() * 64, rtol=1e-12)


def _bn_model():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = nn.BatchNorm1d(3)

        def forward(self, x):
            h = self.bn(x)
            return h * h.abs().max().item()
    return M().double()


def _add_to_input(x):
    with mg.no_grad():
        x.add_(1.0)
    return x * x.sum().item()


@pytest.mark.parametrize("make, reason", [(lambda: _bn_model(), "changes an input in place"),
                                          (lambda: _add_to_input, "in-place")])
def test_traces_whose_python_cannot_run_twice_run_eagerly_and_say_why(make, reason):
    eager_fn, compiled_fn = make(), make()
    if isinstance(eager_fn, nn.Module):
        compiled_fn.load_state_dict(eager_fn.state_dict())
    c = mg.compile(compiled_fn)
    x_eager, x_comp = mg.randn(4, 3, dtype=mg.float64), None
    x_comp = x_eager.clone()
    for _ in range(3):
        np.testing.assert_allclose(c(x_comp).detach().numpy(), eager_fn(x_eager).detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(x_comp.numpy(), x_eager.numpy())   # the input changed exactly as often
    if isinstance(eager_fn, nn.Module):
        np.testing.assert_allclose(compiled_fn.bn.running_mean.numpy(), eager_fn.bn.running_mean.numpy())
    assert c.stats["eager"] == 2 and c.stats["piecewise"] == 0
    why = next(iter(c.cache.values())).why_eager
    assert reason in why
    assert reason in str(mg.compile.explain(make(), mg.randn(4, 3, dtype=mg.float64)))


def test_a_library_call_returning_several_tensors_replays_piecewise():
    def f(x):
        v, i = x.max(dim=1)            # (values, indices): one call of max (indices come from outside apply)
        return v * v.sum().item() + i
    c = mg.compile(f)
    for _ in range(3):
        x = mg.randn(4, 5, dtype=mg.float64)
        np.testing.assert_allclose(c(x).numpy(), f(x).numpy(), rtol=1e-12)
    assert c.stats["piecewise"] == 2 and c.stats["deopts"] == 0
    traced = next(iter(c.cache.values())).graphs[0]
    assert [n.op_name for n in traced.calls()][:3] == ["max", "getitem", "getitem"]


def test_explain_says_how_later_calls_replay(capsys):
    assert "Replay: piecewise" in str(mg.compile.explain(sign_branch, mg.ones(3)))
    assert "Replay: whole graph" in str(mg.compile.explain(lambda x: x * 2, mg.ones(3)))


def test_piecewise_on_the_device(device):
    def f(x):
        h = (x * 2.0).tanh() + 1.0
        if h.sum() > 0:
            h = h * h.mean().item()
        return h.sigmoid()
    c = mg.compile(f)
    for sign in (1, 1, -1):
        x = mg.tensor(sign * np.linspace(0.1, 1, 6), dtype=mg.float64, device=device)
        out = c(x)
        assert out.device == x.device
        np.testing.assert_allclose(out.cpu().numpy(), f(x).cpu().numpy(), rtol=1e-12)
    assert c.stats["piecewise"] == 2


def _detached(x):
    with mg.no_grad():
        y = (x * 2.0).tanh()       # a constant to autograd
    return (y * x).sum()


def _detached_with_break(x):
    with mg.no_grad():
        y = (x * 2.0).tanh()
    return (y * x).sum() * (1.0 + x.mean().item() ** 2)


@pytest.mark.parametrize("f, kind", [(_detached, "replays"), (_detached_with_break, "piecewise")])
def test_a_no_grad_block_inside_the_function_keeps_its_gradients(f, kind):
    c = mg.compile(f)
    x0 = np.linspace(-1, 1, 5)
    for _ in range(3):
        _assert_same(_value_and_grads(c, [x0]), _value_and_grads(f, [x0]))
    assert c.stats[kind] == 2 and c.stats["deopts"] == 0


def test_random_tensors_made_in_python_are_drawn_once_in_eager_order():
    def f(x):
        noise = mg.randn(*x.shape, dtype=mg.float64)      # a call_function: Python draws it, once
        h = (x + noise).tanh()
        s = h.sum().item()
        return F.dropout(h, 0.5) * s + mg.rand(*x.shape, dtype=mg.float64)
    c = mg.compile(f)
    x0 = np.ones((4, 4))
    c(*_leaves(x0))
    for seed in (1, 2):
        mg.manual_seed(seed)
        got = _value_and_grads(c, [x0])
        mg.manual_seed(seed)
        _assert_same(got, _value_and_grads(f, [x0]))
    assert c.stats["piecewise"] == 2 and c.stats["deopts"] == 0


def test_an_in_place_change_off_the_traced_path_inside_a_piece_is_an_error_not_a_wrong_value():
    flag = [False]

    def f(x, y):
        h = (x * y).tanh()
        if flag[0]:
            with mg.no_grad():
                y.add_(1.0)          # after mul read y, before its piece runs
        return (h + y).sum() * x.sum().item()
    c = mg.compile(f)
    x, y = mg.ones(3), mg.ones(3)
    c(x, y)
    flag[0] = True
    with pytest.raises(RuntimeError, match=r"changed in place after mul"):
        c(x, y)


def test_a_call_python_runs_takes_the_numbers_python_passes():
    def f(x):
        s = x.mean().item()
        return (x * mg.full((3,), s, dtype=mg.float64)).tanh()   # full(): made outside apply, Python runs it
    c = mg.compile(f)
    for k in range(3):
        x = mg.randn(3, dtype=mg.float64) + k
        np.testing.assert_allclose(c(x).numpy(), f(x).numpy(), rtol=1e-12)
    assert c.stats["piecewise"] == 2 and c.stats["deopts"] == 0


@pytest.mark.parametrize("path", ["traced", "factory", "late op", "early return"])
def test_paths_off_the_trace_deoptimise_with_eager_values(path):
    flag = [False]

    def f(x, y):
        positive = x > 0                           # made outside apply: Python runs it
        h = (x * 2.0).tanh()                       # fused away inside the next piece
        m = mg.where(positive, h, y)               # where on tensors: left to its op (transparent)
        s = (m * 3.0).sum().item()                 # the break
        if flag[0] and path == "factory":
            return (x * s) + mg.zeros_like(x)      # a factory the trace does not have
        if flag[0] and path == "early return":
            return x * s                           # returns before the traced sin
        out = (x * s).sin()
        if flag[0] and path == "late op":
            out = out + h                          # h (fused away, its piece done) read by an op
        return out
    def run(fn):
        x, y = _leaves(x0, y0)
        out = fn(x, y)
        (out * out).sum().backward()
        return [out.detach().numpy()] + [None if t.grad is None else t.grad.numpy() for t in (x, y)]
    c = mg.compile(f)
    x0, y0 = np.linspace(-1, 1, 6).reshape(2, 3), np.ones((2, 3))
    c(*_leaves(x0, y0))
    flag[0] = path != "traced"
    for _ in range(2):
        for got, want in zip(run(c), run(f)):
            assert (got is None) == (want is None)
            if got is not None:
                np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-12)
    assert c.stats["piecewise"] == 2 and c.stats["deopts"] == (0 if path == "traced" else 2)
