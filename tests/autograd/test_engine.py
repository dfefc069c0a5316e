"""The backward engine: topological sweep, accumulation, retain_graph, grad modes, version counters,
gradient checks, hooks, autograd.grad, custom Functions, saved-tensor hooks, callbacks, anomaly mode."""
import time

import numpy as np
import pytest

import minigrad as mg
from minigrad.autograd import Function
from minigrad.errors import (AnomalyError, AutogradError, GradientError, InplaceModificationError,
                             MinigradError)


def leaf(values, dtype=mg.float64):
    return mg.tensor(values, dtype=dtype, requires_grad=True)


def host(t):
    return t.detach().numpy()


# --- graph traversal -----------------------------------------------------------------------------------
def test_long_chain_backpropagates_without_recursion():
    x = leaf([1.0])
    y = x
    n = 100_000
    start = time.perf_counter()
    for _ in range(n):
        y = y * 1.0001
    y.sum().backward()
    elapsed = time.perf_counter() - start
    np.testing.assert_allclose(host(x.grad), [1.0001 ** n], rtol=1e-9)
    assert elapsed < 30, f"a 100k-node chain took {elapsed:.1f}s"


def test_topological_order_puts_consumers_first():
    x = leaf([1.0])
    a = x * 2
    b = a + 1
    c = a * b
    order = mg.autograd.topological_order([c.grad_fn])
    pos = {node: i for i, node in enumerate(order)}
    assert pos[c.grad_fn] < pos[b.grad_fn] < pos[a.grad_fn] < pos[x._acc]


@pytest.mark.parametrize("fn,grad", [(lambda x: x * x, lambda v: 2 * v), (lambda x: x + x, lambda v: 2 + 0 * v),
                                     (lambda x: x * x * x, lambda v: 3 * v ** 2),
                                     (lambda x: (x + 1) * (x - 1), lambda v: 2 * v),
                                     (lambda x: x.exp() * x.exp() + x, lambda v: 2 * np.exp(2 * v) + 1)])
def test_reuse_and_diamonds(fn, grad):
    v = np.array([0.5, -1.0, 2.0])
    x = leaf(v)
    fn(x).sum().backward()
    np.testing.assert_allclose(host(x.grad), grad(v), rtol=1e-12)


def test_diamond_with_shared_intermediate():
    x = leaf([2.0])
    a = x * 3          # a = 6
    b = a.exp()        # two paths from a
    c = a * a
    (b + c).sum().backward()
    np.testing.assert_allclose(host(x.grad), [3 * (np.exp(6.0) + 2 * 6.0)])


def test_gradients_accumulate_across_backward_calls():
    x = leaf([1.0, 2.0])
    (x * 3).sum().backward()
    g = x.grad
    (x * x).sum().backward()
    np.testing.assert_allclose(host(x.grad), [3 + 2, 3 + 4])
    assert x.grad is g  # accumulated in place (+=), like PyTorch
    x.grad = None
    (x * 3).sum().backward()
    np.testing.assert_allclose(host(x.grad), [3.0, 3.0])


def test_grad_is_not_aliased_between_leaves():
    a, b = leaf([1.0]), leaf([1.0])
    (a + b).sum().backward()
    assert a.grad.array is not b.grad.array
    a.grad.array += 10
    np.testing.assert_allclose(host(b.grad), [1.0])


def test_non_scalar_backward_needs_gradient():
    x = leaf([1.0, 2.0])
    y = x * 2
    with pytest.raises(AutogradError, match=r"scalar.*\(2,\)"):
        y.backward()
    y.backward(gradient=mg.tensor([1.0, 10.0], dtype=mg.float64))
    np.testing.assert_allclose(host(x.grad), [2.0, 20.0])
    with pytest.raises(AutogradError, match="shape"):
        (x * 2).backward(mg.tensor([1.0, 2.0, 3.0]))


def test_backward_gradient_may_be_array_or_list_and_is_cast():
    x = leaf([1.0, 2.0])
    (x * 2).backward(np.array([1.0, 1.0], dtype=np.float32))
    assert x.grad.dtype == mg.float64
    np.testing.assert_allclose(host(x.grad), [2.0, 2.0])


def test_backward_on_tensor_without_grad_raises():
    with pytest.raises(AutogradError, match="does not require grad"):
        mg.tensor([1.0]).sum().backward()


def test_backward_on_leaf_itself():
    x = leaf([3.0])
    x.backward()
    np.testing.assert_allclose(host(x.grad), [1.0])


def test_second_backward_through_freed_graph_raises():
    x = leaf([1.0, 2.0])
    y = (x * x).sum()
    y.backward()
    with pytest.raises(AutogradError, match=r"mul: .*second time.*retain_graph=True"):
        y.backward()


def test_retain_graph_allows_second_backward():
    x = leaf([1.0, 2.0])
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    first = host(x.grad).copy()
    y.backward()
    np.testing.assert_allclose(host(x.grad), 2 * first)


# --- grad modes ------------------------------------------------------------------------------------------
def test_no_grad_builds_no_graph():
    x = leaf([1.0])
    with mg.no_grad():
        y = x * 2 + 1
        assert not mg.is_grad_enabled()
    assert mg.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None and y.is_leaf


def test_no_grad_decorator_and_enable_grad_inside():
    x = leaf([1.0])

    @mg.no_grad()
    def f():
        a = x * 2
        with mg.enable_grad():
            b = x * 2
        return a, b
    a, b = f()
    assert a.grad_fn is None and b.grad_fn is not None
    assert mg.is_grad_enabled()

    @mg.enable_grad()
    def g():
        return x * 3
    with mg.no_grad():
        c = g()
    assert c.requires_grad


def test_set_grad_enabled_forms():
    x = leaf([1.0])
    with mg.set_grad_enabled(False):
        assert (x * 2).grad_fn is None
    assert mg.is_grad_enabled()
    mg.set_grad_enabled(False)
    try:
        assert not mg.is_grad_enabled()
        assert (x * 2).grad_fn is None
    finally:
        mg.set_grad_enabled(True)
    assert (x * 2).grad_fn is not None

    @mg.set_grad_enabled(False)
    def f():
        return x * 2
    assert mg.is_grad_enabled()
    assert f().grad_fn is None and mg.is_grad_enabled()


def test_grad_mode_restored_after_exception():
    with pytest.raises(RuntimeError):
        with mg.no_grad():
            raise RuntimeError("boom")
    assert mg.is_grad_enabled()


def test_integer_results_do_not_require_grad():
    x = leaf([1.5, 2.5])
    assert not x.argmax().requires_grad
    assert not (x > 2).requires_grad
    assert not x.long().requires_grad


# --- version counters and in-place ops -----------------------------------------------------------------
def test_inplace_on_saved_output_raises_naming_the_op():
    x = leaf([1.0, 2.0])
    y = x.exp()  # exp saves its output
    y.add_(1)
    with pytest.raises(InplaceModificationError, match=r"^exp: .*its output.*version 1, expected 0"):
        y.sum().backward()


def test_inplace_on_saved_input_raises_naming_the_op():
    x, w = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    a = x * 1
    b = a * w  # mul saves a for w's gradient
    a.mul_(2)
    with pytest.raises(InplaceModificationError, match=r"^mul: .*input 0"):
        b.sum().backward()


def test_inplace_through_a_view_is_detected():
    x, w = leaf([1.0, 2.0, 3.0, 4.0]), leaf([1.0, 1.0, 1.0, 1.0])
    base = x * 1
    y = base.view(2, 2) * w.view(2, 2)  # mul saves the view of base
    with mg.no_grad():
        base[0] = 0.0  # bumps the counter the view shares
    with pytest.raises(InplaceModificationError, match="^mul: "):
        y.sum().backward()


def test_inplace_on_leaf_requiring_grad_raises():
    x = leaf([1.0, 2.0])
    for op in (lambda t: t.add_(1), lambda t: t.mul_(2), lambda t: t.zero_(), lambda t: t.fill_(1.0),
               lambda t: t.clamp_(0, 1), lambda t: t.__iadd__(1), lambda t: t.copy_(mg.zeros(2))):
        with pytest.raises(AutogradError, match="leaf"):
            op(x)
    assert x._version == 0


def test_inplace_under_no_grad_on_leaf_works_and_bumps_version():
    x = leaf([1.0, 2.0])
    with mg.no_grad():
        x.add_(1)
        x.mul_(2)
        x -= 1
        x /= 2
    np.testing.assert_allclose(host(x), [1.5, 2.5])
    assert x._version == 4 and x.requires_grad and x.is_leaf


def test_recorded_inplace_ops_on_non_leaf_have_correct_gradients():
    x, w = leaf([1.0, -2.0, 3.0]), leaf([3.0, 4.0, 5.0])
    y = x * 1
    y.mul_(w)        # y = x * w; w's gradient needs the old y (= x)
    y.add_(2)
    y.pow_(2)        # y = (x*w + 2)^2
    y += 1
    y.clamp_(max=60.0)
    assert y._version == 5 and not y.is_leaf
    y.sum().backward()
    xv, wv = np.array([1.0, -2.0, 3.0]), np.array([3.0, 4.0, 5.0])
    inner = xv * wv + 2
    live = inner ** 2 + 1 <= 60.0
    np.testing.assert_allclose(host(x.grad), 2 * inner * wv * live)
    np.testing.assert_allclose(host(w.grad), 2 * inner * xv * live)


def test_inplace_op_with_itself_as_operand():
    x = leaf([1.0, 2.0])
    y = x * 1
    y.mul_(y)
    y.sum().backward()
    np.testing.assert_allclose(host(x.grad), [2.0, 4.0])


def test_views_share_the_version_counter():
    x = mg.zeros(2, 3)
    for v in (x.view(6), x[0], x.transpose(0, 1), x.unsqueeze(0), x.detach()):
        assert v._version_counter is x._version_counter
    assert x[[0]]._version_counter is not x._version_counter  # advanced indexing copies


def test_inplace_autograd_on_a_view_is_refused():
    x = leaf([1.0, 2.0])
    y = x * 1
    with pytest.raises(AutogradError, match="view"):
        y[0:1].mul_(2)


def test_detach_shares_storage_and_version():
    x = leaf([1.0, 2.0])
    d = x.detach()
    assert not d.requires_grad and d.grad_fn is None
    d.add_(1)
    np.testing.assert_allclose(host(x), [2.0, 3.0])
    assert x._version == 1


# --- checks of gradients returned by backward ------------------------------------------------------
class WrongShape(Function):
    @staticmethod
    def forward(ctx, a):
        return a * 2

    @staticmethod
    def backward(ctx, grad):
        return grad[:1]


class WrongDtype(Function):
    @staticmethod
    def forward(ctx, a):
        return a * 2

    @staticmethod
    def backward(ctx, grad):
        return grad.astype(np.float32)


class WrongCount(Function):
    @staticmethod
    def forward(ctx, a, b):
        return a * b

    @staticmethod
    def backward(ctx, grad):
        return grad


class SumToScalar(Function):
    """Returns a gradient with extra broadcast dims: the engine must sum it back to the input's shape."""

    @staticmethod
    def forward(ctx, a):
        return a.sum(keepdims=True)

    @staticmethod
    def backward(ctx, grad):
        return np.broadcast_to(grad, (4, 2, 3)) * 1.0


def test_wrong_shaped_gradient_names_the_op():
    x = leaf([1.0, 2.0, 3.0])
    with pytest.raises(GradientError, match=r"^wrong_shape: .*shape \(1,\) for input 0 of shape \(3,\)"):
        WrongShape.apply(x).sum().backward()


def test_wrong_dtype_gradient_names_the_op():
    x = leaf([1.0, 2.0, 3.0])
    with pytest.raises(GradientError, match=r"^wrong_dtype: .*float32 gradient for input 0 of dtype float64"):
        WrongDtype.apply(x).sum().backward()


def test_wrong_number_of_gradients_names_the_op():
    x, y = leaf([1.0]), leaf([2.0])
    with pytest.raises(GradientError, match=r"^wrong_count: backward returned 1 gradients for 2 inputs"):
        WrongCount.apply(x, y).sum().backward()


def test_engine_unbroadcasts_returned_gradients():
    x = leaf(np.ones((2, 3)))
    SumToScalar.apply(x).sum().backward()
    np.testing.assert_allclose(host(x.grad), np.full((2, 3), 4.0))
    y = leaf(np.ones((1, 3)))
    mg.ops.elementwise.Add.apply(y, mg.tensor(np.ones((5, 3)))).sum().backward()  # broadcast input, grad summed back
    np.testing.assert_allclose(host(y.grad), np.full((1, 3), 5.0))


# --- hooks -------------------------------------------------------------------------------------------------
def test_register_hook_on_leaf_modifies_grad():
    x = leaf([1.0, 2.0])
    seen = []
    x.register_hook(lambda g: seen.append(host(g).copy()))
    x.register_hook(lambda g: g * 10)
    (x * 3).sum().backward()
    np.testing.assert_allclose(seen[0], [3.0, 3.0])
    np.testing.assert_allclose(host(x.grad), [30.0, 30.0])


def test_register_hook_on_non_leaf_changes_upstream_grad():
    x = leaf([1.0, 2.0])
    y = x * 2
    h = y.register_hook(lambda g: g + 1)
    (y * 3).sum().backward()
    np.testing.assert_allclose(host(x.grad), [8.0, 8.0])
    assert y.grad is None  # non-leaf grads are not kept
    h.remove()
    x.grad = None
    y2 = x * 2
    (y2 * 3).sum().backward()
    np.testing.assert_allclose(host(x.grad), [6.0, 6.0])


def test_hook_handle_remove():
    x = leaf([1.0])
    h = x.register_hook(lambda g: g * 100)
    h.remove()
    h.remove()  # idempotent
    (x * 2).sum().backward()
    np.testing.assert_allclose(host(x.grad), [2.0])


def test_register_hook_needs_requires_grad():
    with pytest.raises(AutogradError, match="register_hook"):
        mg.tensor([1.0]).register_hook(lambda g: g)


def test_hook_sees_the_total_gradient_once():
    x = leaf([1.0])
    calls = []
    x.register_hook(lambda g: calls.append(host(g).copy()))
    (x * 2 + x * 3 + x).sum().backward()
    assert len(calls) == 1
    np.testing.assert_allclose(calls[0], [6.0])


def test_retain_grad():
    x = leaf([1.0, 2.0])
    y = x * 2
    y.retain_grad()
    z = y * y
    z.retain_grad()
    z.sum().backward()
    np.testing.assert_allclose(host(y.grad), [4.0, 8.0])
    np.testing.assert_allclose(host(z.grad), [1.0, 1.0])
    y.retain_grad()  # twice is harmless
    x.retain_grad()  # on a leaf: no-op, leaves keep grads anyway
    np.testing.assert_allclose(host(x.grad), [8.0, 16.0])


def test_retain_grad_sees_grad_after_hooks():
    # PyTorch runs the retains_grad hook last, whatever the registration order
    x = leaf([1.0, 2.0])
    y = x * 2
    y.retain_grad()
    y.register_hook(lambda g: g * 10)
    (y * 3).sum().backward()
    np.testing.assert_allclose(host(y.grad), [30.0, 30.0])
    np.testing.assert_allclose(host(x.grad), [60.0, 60.0])


def test_post_accumulate_grad_hook_fires_once_per_leaf_after_grad_is_set():
    x, w = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    seen = []
    x.register_post_accumulate_grad_hook(lambda t: seen.append(("x", host(t.grad).copy())))
    w.register_post_accumulate_grad_hook(lambda t: seen.append(("w", host(t.grad).copy())))
    (x * w + x * x + w).sum().backward()
    assert sorted(name for name, _ in seen) == ["w", "x"]
    got = dict(seen)
    np.testing.assert_allclose(got["x"], [3.0 + 2.0, 4.0 + 4.0])
    np.testing.assert_allclose(got["w"], [2.0, 3.0])
    (x * 2).sum().backward()
    assert len(seen) == 3 and seen[-1][0] == "x"
    np.testing.assert_allclose(seen[-1][1], [7.0, 10.0])  # sees the accumulated grad


def test_post_accumulate_grad_hook_only_on_leaves_and_removable():
    x = leaf([1.0])
    with pytest.raises(AutogradError, match="leaf"):
        (x * 2).register_post_accumulate_grad_hook(lambda t: None)
    calls = []
    h = x.register_post_accumulate_grad_hook(lambda t: calls.append(1))
    h.remove()
    (x * 2).sum().backward()
    assert calls == []


# --- autograd.grad ------------------------------------------------------------------------------------
def test_autograd_grad_does_not_touch_dot_grad():
    x, w = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    y = (x * x * w).sum()
    gx, = mg.autograd.grad(y, x, retain_graph=True)   # a tuple even for one input, as in PyTorch
    np.testing.assert_allclose(host(gx), [6.0, 16.0])
    assert x.grad is None and w.grad is None
    gx, gw = mg.autograd.grad(y, [x, w])
    np.testing.assert_allclose(host(gw), [1.0, 4.0])
    assert x.grad is None and w.grad is None


def test_autograd_grad_of_non_leaf_and_unused():
    x, u = leaf([1.0, 2.0]), leaf([5.0])
    h = x * 3
    y = (h * h).sum()
    gh, = mg.autograd.grad(y, h, retain_graph=True)
    np.testing.assert_allclose(host(gh), [6.0, 12.0])
    with pytest.raises(AutogradError, match="allow_unused"):
        mg.autograd.grad(y, [x, u], retain_graph=True)
    gx, gu = mg.autograd.grad(y, [x, u], allow_unused=True)
    assert gu is None
    np.testing.assert_allclose(host(gx), [18.0, 36.0])


def test_autograd_grad_with_grad_outputs():
    x = leaf([1.0, 2.0])
    g, = mg.autograd.grad(x * x, x, grad_outputs=mg.tensor([1.0, 0.5], dtype=mg.float64))
    np.testing.assert_allclose(host(g), [2.0, 2.0])


def test_autograd_backward_function():
    x = leaf([1.0, 2.0])
    mg.autograd.backward([(x * 2).sum(), (x * x).sum()])
    np.testing.assert_allclose(host(x.grad), [4.0, 6.0])


# --- custom Functions -------------------------------------------------------------------------------
class Cube(Function):
    @staticmethod
    def forward(ctx, a, scale):
        ctx.save_for_backward(a)
        ctx.scale = scale
        return scale * a ** 3

    @staticmethod
    def backward(ctx, grad):
        a, = ctx.saved_tensors
        return grad * ctx.scale * 3 * a ** 2, None


class MulRecordingNeeds(Function):
    seen = None

    @staticmethod
    def forward(ctx, a, b):
        MulRecordingNeeds.seen = ctx.needs_input_grad
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return (grad * b if ctx.needs_input_grad[0] else None), (grad * a if ctx.needs_input_grad[1] else None)


def test_custom_function_forward_backward_and_gradcheck():
    x = leaf([1.0, -2.0])
    y = Cube.apply(x, 2.0)
    np.testing.assert_allclose(host(y), [2.0, -16.0])
    assert type(y.grad_fn) is Cube and y.grad_fn.name == "cube"
    y.sum().backward()
    np.testing.assert_allclose(host(x.grad), [6.0, 24.0])
    assert mg.autograd.gradcheck(lambda t: Cube.apply(t, 0.5), (leaf([0.3, -1.2, 2.0]),))


def test_custom_function_needs_input_grad():
    a, b = leaf([1.0]), mg.tensor([2.0], dtype=mg.float64)
    MulRecordingNeeds.apply(a, b).sum().backward()
    assert MulRecordingNeeds.seen == (True, False)
    assert b.grad is None and host(a.grad) == [2.0]
    with mg.no_grad():
        out = MulRecordingNeeds.apply(a, b)
    assert MulRecordingNeeds.seen == (False, False) and out.grad_fn is None


def test_custom_function_without_tensor_argument_errors():
    with pytest.raises(AutogradError, match="cube"):
        Cube.apply(1.0, 2.0)


def test_saved_tensors_hooks_pack_and_unpack():
    packed, unpacked = [], []

    def pack(a):
        packed.append(a.shape)
        return ("box", a.copy())

    def unpack(box):
        unpacked.append(box[0])
        return box[1]
    x, w = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    with mg.autograd.saved_tensors_hooks(pack, unpack):
        y = (x * w).exp()
    z = (x * w).exp()  # outside: no hooks
    assert len(packed) == 3  # x, w for mul; the output for exp
    (y.sum() + z.sum()).backward()
    assert unpacked == ["box"] * 3
    np.testing.assert_allclose(host(x.grad), 2 * np.array([3.0, 4.0]) * np.exp([3.0, 8.0]))
    assert mg.autograd.graph.saved_tensors_hooks is mg.autograd.saved_tensors_hooks


def test_saved_tensors_hooks_see_only_arrays_and_keep_version_checks():
    packed = []

    def pack(a):
        assert isinstance(a, np.ndarray), type(a)
        packed.append(a.shape)
        return a.copy()
    x = leaf([1.0, 2.0])
    with mg.autograd.saved_tensors_hooks(pack, lambda a: a):
        y = (x * 2.0) ** 3  # mul saves (x, 2.0); pow saves (base, 3, out)
        a = x * 1
        b = a * x
    assert packed == [(2,)] * 6  # x; base and out (not the exponent 3); x; a and x
    y.sum().backward()
    np.testing.assert_allclose(host(x.grad), 3 * 8 * np.array([1.0, 4.0]))
    a.add_(1)  # a was saved by the mul that made b: still detected with hooks
    with pytest.raises(InplaceModificationError, match="^mul"):
        b.sum().backward()


def test_queue_callback_runs_at_the_end_of_backward():
    x = leaf([1.0])
    events = []

    def hook(g):
        events.append("hook")
        mg.autograd.queue_callback(lambda: events.append(("callback", x.grad is not None)))
    x.register_post_accumulate_grad_hook(lambda t: events.append("accumulated"))
    y = x * 2
    y.register_hook(hook)
    (y * 3).sum().backward()
    assert events == ["hook", "accumulated", ("callback", True)]
    with pytest.raises(AutogradError, match="queue_callback"):
        mg.autograd.queue_callback(lambda: None)


# --- anomaly mode --------------------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_detect_anomaly_names_op_with_nan_in_forward():
    x = leaf([-1.0, 2.0])
    with mg.autograd.detect_anomaly():
        assert mg.autograd.is_anomaly_enabled()
        with pytest.raises(AnomalyError, match=r"^detect_anomaly: log produced NaN in its output"):
            x.log()
    assert not mg.autograd.is_anomaly_enabled()
    assert np.isnan(host(x.log())[0])  # without anomaly mode NaN simply propagates


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_detect_anomaly_names_op_with_inf_in_backward():
    x = leaf([0.0, 4.0])
    y = x.sqrt().sum()  # forward is finite
    with mg.autograd.detect_anomaly():
        with pytest.raises(AnomalyError, match=r"^detect_anomaly: sqrt produced Inf in its gradient for input 0"):
            y.backward()


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_detect_anomaly_decorator():
    @mg.autograd.detect_anomaly()
    def f(t):
        return t / 0.0
    with pytest.raises(AnomalyError, match="div"):
        f(leaf([1.0]))
    assert not mg.autograd.is_anomaly_enabled()


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_detect_anomaly_without_nan_checks_stays_on_and_names_the_forward_call_of_a_failing_backward():
    class Broken(mg.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, grad):
            raise RuntimeError("broken backward")

    x = leaf([-1.0, 2.0])
    with mg.autograd.detect_anomaly(check_nan=False):
        assert mg.autograd.is_anomaly_enabled()          # check_nan=False keeps anomaly mode on (PyTorch's)
        assert np.isnan(host(x.log())[0])                # ... without the NaN checks
        y = Broken.apply(x)                              # the forward call the note points at
        with pytest.raises(RuntimeError, match="broken backward") as info:
            y.sum().backward()
    assert not mg.autograd.is_anomaly_enabled()
    notes = "".join(getattr(info.value, "__notes__", []))
    if hasattr(info.value, "add_note"):                  # Python >= 3.11
        assert "the forward call of broken" in notes and "y = Broken.apply(x)" in notes


def test_errors_are_minigrad_errors():
    for cls in (AnomalyError, AutogradError, GradientError, InplaceModificationError):
        assert issubclass(cls, MinigradError) and issubclass(cls, RuntimeError)
