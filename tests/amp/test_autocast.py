"""autocast: every op of the policy table gives the dtype the table says, on cpu and (emulated) cuda;
nesting, enabled=False, the decorator, the weight-cast cache; backward in each op's forward dtype;
gradients of real models under autocast against float32."""
import collections

import numpy as np
import pytest

import minigrad as mg
import minigrad.nn.functional as F
from minigrad import nn
from minigrad.amp import policy
from minigrad.autograd import extensions
from minigrad.autograd.function import Function
from minigrad.examples.tiny_gpt import TinyGPT

F16, F32 = mg.float16, mg.float32


def _r(dev, *shape, dtype=F32):
    return mg.randn(*shape, device=dev).to(dtype)


def _pos(dev, *shape, dtype=F32):
    return (mg.rand(*shape, device=dev) + 0.5).to(dtype)


def _t(dev):
    return mg.tensor([0, 2, 1], device=dev)


# op name -> builds the call from a device; LOWER cases get float32 inputs, FLOAT32 cases float16 ones,
# PROMOTE cases one float16 and one float32 input
CASES = {
    "matmul": lambda d: _r(d, 3, 4) @ _r(d, 4, 5),
    "linear": lambda d: F.linear(_r(d, 2, 4), _r(d, 3, 4), _r(d, 3)),
    "conv1d": lambda d: F.conv1d(_r(d, 2, 3, 8), _r(d, 4, 3, 3), _r(d, 4)),
    "conv2d": lambda d: F.conv2d(_r(d, 2, 3, 6, 6), _r(d, 4, 3, 3, 3), _r(d, 4), padding=1),
    "scaled_dot_product_attention": lambda d: F.scaled_dot_product_attention(
        _r(d, 2, 5, 4), _r(d, 2, 5, 4), _r(d, 2, 5, 4), is_causal=True),
    "softmax": lambda d: F.softmax(_r(d, 3, 4, dtype=F16), dim=-1),
    "log_softmax": lambda d: F.log_softmax(_r(d, 3, 4, dtype=F16), dim=-1),
    "cross_entropy": lambda d: F.cross_entropy(_r(d, 3, 4, dtype=F16), _t(d)),
    "nll_loss": lambda d: F.nll_loss(_r(d, 3, 4, dtype=F16), _t(d)),
    "mse_loss": lambda d: F.mse_loss(_r(d, 3, 4, dtype=F16), _r(d, 3, 4, dtype=F16)),
    "binary_cross_entropy_with_logits": lambda d: F.binary_cross_entropy_with_logits(
        _r(d, 3, 4, dtype=F16), _pos(d, 3, 4, dtype=F16) - 0.5),
    "layer_norm": lambda d: F.layer_norm(_r(d, 3, 4, dtype=F16), (4,), _r(d, 4), _r(d, 4)),
    "batch_norm": lambda d: F.batch_norm(_r(d, 5, 3, 2, dtype=F16), mg.zeros(3, device=d), mg.ones(3, device=d),
                                         _r(d, 3), _r(d, 3), training=True),
    "sum": lambda d: _r(d, 3, 4, dtype=F16).sum(),
    "mean": lambda d: _r(d, 3, 4, dtype=F16).mean(dim=0),
    "var": lambda d: mg.var(_r(d, 3, 4, dtype=F16), dim=1),
    "prod": lambda d: mg.prod(_pos(d, 3, 4, dtype=F16), dim=1),
    "cumsum": lambda d: mg.cumsum(_r(d, 3, 4, dtype=F16), dim=1),
    "logsumexp": lambda d: mg.logsumexp(_r(d, 3, 4, dtype=F16), dim=1),
    "exp": lambda d: _r(d, 3, 4, dtype=F16).exp(),
    "log": lambda d: _pos(d, 3, 4, dtype=F16).log(),
    "pow": lambda d: _pos(d, 3, 4, dtype=F16) ** 2.5,
    "sqrt": lambda d: _pos(d, 3, 4, dtype=F16).sqrt(),
    "add": lambda d: _r(d, 3, 4, dtype=F16) + _r(d, 3, 4),
    "sub": lambda d: _r(d, 3, 4, dtype=F16) - _r(d, 3, 4),
    "mul": lambda d: _r(d, 3, 4, dtype=F16) * _r(d, 3, 4),
    "div": lambda d: _r(d, 3, 4, dtype=F16) / _pos(d, 3, 4),
    "maximum": lambda d: mg.maximum(_r(d, 3, 4, dtype=F16), _r(d, 3, 4)),
    "minimum": lambda d: mg.minimum(_r(d, 3, 4, dtype=F16), _r(d, 3, 4)),
    "where": lambda d: mg.where(_r(d, 3, 4) > 0, _r(d, 3, 4, dtype=F16), _r(d, 3, 4)),
    "cat": lambda d: mg.cat([_r(d, 3, 4, dtype=F16), _r(d, 2, 4)]),
    "stack": lambda d: mg.stack([_r(d, 3, 4, dtype=F16), _r(d, 3, 4)]),
}
EXPECTED = {policy.LOWER: F16, policy.FLOAT32: F32, policy.PROMOTE: F32}


def _op_names():
    def walk(c):
        for s in c.__subclasses__():
            yield s
            yield from walk(s)
    return {c.name for c in walk(Function)}


def test_every_policy_entry_is_a_real_op_and_has_a_case():
    assert set(CASES) == set(policy.POLICY)
    assert set(policy.POLICY) <= _op_names(), set(policy.POLICY) - _op_names()
    rows = dict(policy.table())
    assert sorted(sum(rows.values(), [])) == sorted(policy.POLICY)


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def dev(request):
    if request.param == "cuda" and not mg.cuda.is_available():
        pytest.skip("no CUDA device (MINIGRAD_EMULATE_CUDA=1 runs the emulated one)")
    return request.param


@pytest.mark.parametrize("name", sorted(policy.POLICY))
def test_policy_output_dtype(name, dev):
    seen = collections.Counter()

    def spy(op, args, kwargs, run):
        seen[op.name] += 1
        return run()

    with extensions.forward_wrappers.added(spy):
        with mg.autocast(device_type=dev):
            out = CASES[name](dev)
    assert seen[name] >= 1, f"the case for {name} did not run that op (ran {sorted(seen)})"
    assert out.dtype == EXPECTED[policy.POLICY[name]], (name, out.dtype)
    assert str(out.device).startswith(dev)
    # outside autocast the call keeps its natural dtype: autocast made the difference
    # (layer_norm/batch_norm mix float16 input with float32 weights: without autocast that is not float16)
    if name not in ("layer_norm", "batch_norm"):
        plain = CASES[name](dev)
        assert plain.dtype == (F32 if policy.POLICY[name] is not policy.FLOAT32 else F16)


def test_autocast_for_one_device_type_leaves_the_other_alone():
    a, b = mg.randn(3, 4), mg.randn(4, 2)
    with mg.autocast(device_type="cuda"):
        assert (a @ b).dtype == F32
        assert mg.amp.is_autocast_enabled("cuda") and not mg.amp.is_autocast_enabled("cpu")
    assert not mg.amp.is_autocast_enabled("cuda")
    assert not extensions.input_casts  # nothing stays registered


def test_nesting_disabled_inside_and_decorator():
    a, b = mg.randn(3, 4), mg.randn(4, 2)

    @mg.autocast(device_type="cpu")
    def low(x, y):
        return x @ y

    with mg.autocast(device_type="cpu"):
        assert (a @ b).dtype == F16
        with mg.autocast(device_type="cpu", enabled=False):
            assert (a @ b).dtype == F32
            assert low(a, b).dtype == F16          # the decorator opens its own region
            assert (a @ b).dtype == F32
        with mg.autocast(device_type="cpu"):
            assert (a @ b).dtype == F16
        assert (a @ b).dtype == F16
    assert (a @ b).dtype == F32 and low(a, b).dtype == F16
    assert not extensions.input_casts


def test_bad_arguments_name_autocast():
    with pytest.raises(ValueError, match="autocast: device_type"):
        mg.autocast(device_type="tpu")
    with pytest.raises(TypeError, match="autocast: dtype"):
        mg.autocast(device_type="cpu", dtype=mg.float64)


def test_float64_and_integer_tensors_are_not_cast():
    with mg.autocast(device_type="cpu"):
        assert (mg.randn(3, 4).double() @ mg.randn(4, 2).double()).dtype == mg.float64
        assert mg.arange(6).sum().dtype == mg.int64


def test_weight_cast_cache_casts_a_parameter_once_per_region_and_sees_in_place_changes(monkeypatch):
    from minigrad.amp import autocast_mode
    lin = nn.Linear(4, 4)
    casts = collections.Counter()  # conversions of each parameter's own array
    convert = autocast_mode.convert

    def spy(be, array, dtype):
        for name, p in (("weight", lin.weight), ("bias", lin.bias)):
            casts[name] += array is p.array
        return convert(be, array, dtype)

    monkeypatch.setattr(autocast_mode, "convert", spy)
    x = mg.randn(2, 4)
    with mg.autocast(device_type="cpu"):
        y1 = lin(x)
        y2 = lin(x)
        assert casts == {"weight": 1, "bias": 1}
        with mg.no_grad():
            lin.weight.mul_(2.0)                   # a new version: the cached cast is stale
        y3 = lin(x)
        assert casts == {"weight": 2, "bias": 1}
    with mg.autocast(device_type="cpu"):
        lin(x)                                     # a new region casts again
    assert casts == {"weight": 3, "bias": 2}
    # one graph node per op: linear's edges lead straight to the float32 parameters (no Cast nodes)
    edges = y1.grad_fn.next
    assert y1.grad_fn.name == "linear" and y1.dtype == F16
    assert edges[1].node is lin.weight._accumulator() and edges[1].dtype == np.float32
    y1, y2, y3, b = (t.detach().numpy().astype(np.float32) for t in (y1, y2, y3, lin.bias))
    np.testing.assert_array_equal(y1, y2)
    np.testing.assert_allclose(y3, 2 * y1 - b, rtol=2e-2, atol=2e-2)


def test_backward_runs_each_op_in_its_forward_dtype_and_params_get_float32_grads():
    """Each op is one graph node (no Cast nodes); it receives its gradient in its output's dtype; tensors
    between ops and saved arrays are float16 for LOWER (and following elementwise) ops, float32 for FLOAT32
    ops. On NumPy devices float16 ops compute in float32 on float16 storage (autograd/opmath.py)."""
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.LayerNorm(8), nn.Linear(8, 3))
    x, t = mg.randn(5, 6), mg.tensor([0, 1, 2, 1, 0])
    between, computed = {}, {}

    def outer(op, args, kwargs, run):                   # registered first: sees what the next op gets
        out = run()
        between.setdefault(op.name, set()).add(out.dtype)
        return out

    def inner(op, args, kwargs, run):                   # registered inside autocast: the op's own output
        out = run()
        if out.grad_fn is not None:
            computed[out.grad_fn] = out.array.dtype
        return out

    received = []

    def record_bwd(node, grad, run):
        received.append((node, grad.dtype))
        return run()

    with extensions.forward_wrappers.added(outer), mg.autocast(device_type="cpu"):
        with extensions.forward_wrappers.added(inner):
            h = model[1](model[0](x))
            h.retain_grad()
            loss = F.cross_entropy(model[3](model[2](h)), t)
    saved = {n.name: {a.dtype for a in n._saved if hasattr(a, "dtype") and a.dtype.kind == "f"}
             for n in computed if n._saved}
    with extensions.backward_wrappers.added(record_bwd):
        loss.backward()
    assert between["linear"] == {F16} and between["relu"] == {F16} and between["layer_norm"] == {F32}
    assert saved["linear"] == {np.dtype(np.float16)} and saved["layer_norm"] == {np.dtype(np.float32)}
    checked = [(n.name, g, computed[n]) for n, g in received if n in computed]
    assert {name for name, _, _ in checked} == {"linear", "relu", "layer_norm", "cross_entropy"}
    assert {n.name for n, _ in received} == {"linear", "relu", "layer_norm", "cross_entropy"}  # no casts
    assert all(g == c for _, g, c in checked), [c for c in checked if c[1] != c[2]]
    assert h.grad.dtype == F16
    assert all(p.grad.dtype == F32 for p in model.parameters())


def _grads(model, loss_fn, amp):
    model.zero_grad()
    with mg.autocast(device_type="cpu", enabled=amp):
        loss = loss_fn(model)
    loss.backward()
    return [p.grad.numpy().copy() for p in model.parameters()]


def _relative_errors(model, loss_fn):
    ref, low = _grads(model, loss_fn, False), _grads(model, loss_fn, True)
    return [float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30)) for a, b in zip(low, ref)]


def test_cnn_gradients_under_autocast_match_float32_within_float16_tolerance():
    mg.manual_seed(1)
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1),
                          nn.ReLU(), nn.Flatten(), nn.Linear(16 * 4 * 4, 10))
    x, t = mg.randn(16, 1, 8, 8), mg.randint(0, 10, (16,))
    errs = _relative_errors(model, lambda m: F.cross_entropy(m(x), t))
    print("CNN relative gradient errors under autocast:", [f"{e:.1e}" for e in errs])
    # float16 keeps 11 significant bits (~5e-4 per rounding); ReLU masks that flip near 0 add more in layer 1
    assert max(errs) < 3e-2
    assert max(errs) > 0             # the float16 path really ran


def test_tiny_gpt_gradients_under_autocast_match_float32_within_float16_tolerance():
    mg.manual_seed(2)
    model = TinyGPT(vocab_size=20, block_size=8, d_model=16, n_layer=1, n_head=2)
    idx, tgt = mg.randint(0, 20, (4, 8)), mg.randint(0, 20, (4, 8))
    errs = _relative_errors(model, lambda m: F.cross_entropy(m(idx).reshape(-1, 20), tgt.reshape(-1)))
    print("TinyGPT relative gradient errors under autocast:", [f"{e:.1e}" for e in errs])
    assert max(errs) < 3e-2 and max(errs) > 0


def test_user_saved_tensor_hooks_compose_with_autocast_and_saved_outputs_are_stored_once():
    """A user's pack/unpack (offloading, checkpointing) still sees every saved array under autocast -- in
    float16 -- and backward gives the same gradients as without the hooks."""
    mg.manual_seed(4)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4))
    x, t = mg.randn(6, 8), mg.tensor([0, 1, 2, 3, 0, 1])
    packed = []

    def pack(a):
        packed.append(a.dtype)
        return ("box", a)

    def run(hooks):
        model.zero_grad()
        with mg.autocast(device_type="cpu"):
            if hooks:
                with extensions.saved_tensors_hooks(pack, lambda box: box[1]):
                    loss = F.cross_entropy(model(x), t)
            else:
                loss = F.cross_entropy(model(x), t)
        loss.backward()
        return [p.grad.numpy().copy() for p in model.parameters()]

    plain, hooked = run(False), run(True)
    assert np.dtype(np.float16) in packed and packed
    for a, b in zip(plain, hooked):
        np.testing.assert_array_equal(a, b)
    with mg.autocast(device_type="cpu"):
        y = model[1](model[0](x))                  # tanh saves its output
    tanh = y.grad_fn                              # y is the tanh node's (rounded) output: one node
    assert tanh.name == "tanh" and y.dtype == F16
    saved = [a for a in tanh._saved if hasattr(a, "dtype")]
    assert saved and all(a.dtype == np.float16 for a in saved)
    assert any(a is y.array for a in saved)         # the output itself, not a second float16 copy


def test_emulated_cuda_autocast_matches_cpu():
    if not mg.cuda.is_available():
        pytest.skip("no CUDA device (MINIGRAD_EMULATE_CUDA=1 runs the emulated one)")
    mg.manual_seed(5)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    x, t = mg.randn(6, 8), mg.tensor([0, 1, 2, 3, 0, 1])
    grads = {}
    for dev in ("cpu", "cuda"):
        m = model.to(dev)
        m.zero_grad()
        with mg.autocast(device_type=dev):
            F.cross_entropy(m(x.to(dev)), t.to(dev)).backward()
        grads[dev] = [p.grad.numpy().copy() for p in m.parameters()]
    for a, b in zip(grads["cpu"], grads["cuda"]):
        np.testing.assert_array_equal(a, b)
