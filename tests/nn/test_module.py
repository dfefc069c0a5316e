"""Module and Parameter: registration, iteration, modes, state_dict, hooks, device/dtype moves, repr."""
import copy
import pickle

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn


class MLP(nn.Module):
    def __init__(self, device=None):
        super().__init__()
        self.fc1 = nn.Linear(4, 8, device=device)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(8, 3, device=device)
        self.register_buffer("steps", mg.zeros((), device=device))
        self.register_buffer("cache", mg.ones(2, device=device), persistent=False)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


# --- Parameter --------------------------------------------------------------------------------------
def test_parameter_is_a_leaf_tensor_requiring_grad():
    p = nn.Parameter(mg.randn(2, 3))
    assert isinstance(p, mg.Tensor) and isinstance(p, nn.Parameter)
    assert p.requires_grad and p.is_leaf and p.grad is None
    assert repr(p).startswith("Parameter containing:\ntensor(")
    assert "requires_grad=True" in repr(p)
    q = nn.Parameter(mg.randn(2), requires_grad=False)
    assert not q.requires_grad
    y = (p * 2).sum()
    assert type(p * 2) is mg.Tensor  # ops on parameters give plain tensors
    y.backward()
    np.testing.assert_allclose(p.grad.numpy(), np.full((2, 3), 2.0))


def test_parameter_shares_storage_with_data_and_refuses_integers():
    t = mg.zeros(3)
    p = nn.Parameter(t)
    with mg.no_grad():
        p.fill_(5.0)
    np.testing.assert_array_equal(t.numpy(), [5, 5, 5])
    with pytest.raises(TypeError):
        nn.Parameter(mg.arange(3))
    assert nn.Parameter().shape == (0,)


def test_parameter_deepcopy_and_pickle_make_independent_leaves():
    p = nn.Parameter(mg.randn(3))
    (p * 3).sum().backward()
    q = copy.deepcopy(p)
    assert isinstance(q, nn.Parameter) and q.requires_grad and q is not p
    np.testing.assert_array_equal(q.detach().numpy(), p.detach().numpy())
    np.testing.assert_array_equal(q.grad.numpy(), p.grad.numpy())
    q.grad = None
    (q * 1).sum().backward()                   # the copy's gradient goes to the copy
    np.testing.assert_array_equal(q.grad.numpy(), [1, 1, 1])
    np.testing.assert_array_equal(p.grad.numpy(), [3, 3, 3])
    r = pickle.loads(pickle.dumps(p))
    assert isinstance(r, nn.Parameter) and r.requires_grad
    np.testing.assert_array_equal(r.detach().numpy(), p.detach().numpy())


# --- registration and iteration -------------------------------------------------------------------
def test_named_parameters_buffers_children_modules():
    m = MLP()
    assert [n for n, _ in m.named_parameters()] == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert [p.shape for p in m.parameters()] == [(8, 4), (8,), (3, 8), (3,)]
    assert [n for n, _ in m.named_parameters(recurse=False)] == []
    assert [n for n, _ in m.fc1.named_parameters(prefix="x")] == ["x.weight", "x.bias"]
    assert [n for n, _ in m.named_buffers()] == ["steps", "cache"]
    assert [n for n, _ in m.named_children()] == ["fc1", "act", "fc2"]
    assert [n for n, _ in m.named_modules()] == ["", "fc1", "act", "fc2"]
    assert list(m.children())[0] is m.fc1
    assert len(list(m.modules())) == 4
    assert m.num_parameters() == 8 * 4 + 8 + 3 * 8 + 3
    assert m.get_submodule("fc2") is m.fc2
    assert m.get_parameter("fc2.bias") is m.fc2.bias


def test_shared_parameters_are_listed_once():
    m = nn.Module()
    m.a = nn.Linear(3, 3)
    m.b = nn.Linear(3, 3)
    m.b.weight = m.a.weight
    names = [n for n, _ in m.named_parameters()]
    assert names == ["a.weight", "a.bias", "b.bias"]
    assert len(list(m.parameters())) == 3
    sd = m.state_dict()  # state_dict keeps both names, like PyTorch
    assert list(sd) == ["a.weight", "a.bias", "b.weight", "b.bias"]


def test_setattr_rules():
    m = MLP()
    with pytest.raises(TypeError, match="cannot assign 'Tensor' as parameter 'weight'"):
        m.fc1.weight = mg.randn(8, 4)
    m.fc1.bias = None
    assert m.fc1.bias is None and "bias" in m.fc1._parameters
    assert [n for n, _ in m.fc1.named_parameters()] == ["weight"]
    m.steps = mg.ones(())                      # replace a buffer
    assert m.steps.item() == 1.0
    with pytest.raises(TypeError):
        m.steps = 3.0
    m.fc1 = nn.Identity()                     # replace a child
    assert isinstance(m.fc1, nn.Identity)
    m.extra = nn.Parameter(mg.zeros(2))
    assert "extra" in dict(m.named_parameters())
    del m.extra
    assert "extra" not in dict(m.named_parameters())
    m.plain = mg.zeros(2)                     # plain tensors are ordinary attributes
    assert "plain" not in dict(m.named_buffers())

    class Bad(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(mg.zeros(1))
    with pytest.raises(AttributeError, match="before Module.__init__"):
        Bad()
    with pytest.raises(KeyError):
        m.register_buffer("a.b", mg.zeros(1))
    with pytest.raises(TypeError):
        m.register_parameter("q", mg.zeros(1))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        m.nope


def test_train_eval_and_requires_grad():
    m = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5), nn.Sequential(nn.BatchNorm1d(2)))
    assert all(x.training for x in m.modules())
    assert m.eval() is m
    assert not any(x.training for x in m.modules())
    m.train()
    assert all(x.training for x in m.modules())
    m.requires_grad_(False)
    assert not any(p.requires_grad for p in m.parameters())
    m.requires_grad_()
    assert all(p.requires_grad for p in m.parameters())


def test_zero_grad_and_apply(device):
    m = MLP(device=device)
    m(mg.randn(5, 4, device=device)).sum().backward()
    assert all(p.grad is not None for p in m.parameters())
    m.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad.numpy().any() for p in m.parameters())
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())
    seen = []
    m.apply(lambda mod: seen.append(type(mod).__name__))
    assert seen == ["Linear", "ReLU", "Linear", "MLP"]

    def init_weights(mod):
        if isinstance(mod, nn.Linear):
            nn.init.constant_(mod.weight, 0.5)
    m.apply(init_weights)
    assert np.all(m.fc2.weight.detach().numpy() == 0.5)


# --- state dict -----------------------------------------------------------------------------------
def test_state_dict_keys_order_sharing_and_round_trip(device):
    m = MLP(device=device)
    sd = m.state_dict()
    assert list(sd) == ["steps", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]  # no non-persistent
    assert all(type(v) is mg.Tensor and not v.requires_grad for v in sd.values())
    assert sd["fc1.weight"].array is m.fc1.weight.array     # detached, same storage (PyTorch semantics)
    assert m.state_dict(keep_vars=True)["fc1.weight"] is m.fc1.weight
    m2 = MLP(device=device)
    x = mg.randn(6, 4, device=device)
    assert not np.allclose(m(x).detach().numpy(), m2(x).detach().numpy())
    snapshot = {k: v.clone() for k, v in sd.items()}
    result = m2.load_state_dict(snapshot)
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert repr(result) == "<All keys matched successfully>"
    np.testing.assert_array_equal(m(x).detach().numpy(), m2(x).detach().numpy())
    # loading copies values: the module does not alias the given tensors
    assert m2.fc1.weight.array is not snapshot["fc1.weight"].array


def test_load_state_dict_reports_all_problems_in_one_error():
    m = MLP()
    sd = dict(m.state_dict())
    del sd["fc2.bias"]
    sd["fc3.weight"] = mg.zeros(2)
    sd["fc1.weight"] = mg.zeros(5, 4)
    with pytest.raises(nn.StateDictError) as e:
        m.load_state_dict(sd)
    msg = str(e.value)
    assert "Error(s) in loading state_dict for MLP" in msg
    assert 'Missing key(s) in state_dict: "fc2.bias"' in msg
    assert 'Unexpected key(s) in state_dict: "fc3.weight"' in msg
    assert "size mismatch for fc1.weight: copying a param with shape (5, 4) from checkpoint, the shape in " \
           "current model is (8, 4)" in msg
    assert isinstance(e.value, RuntimeError)


def test_load_state_dict_non_strict_returns_keys_but_still_refuses_shape_mismatch(device):
    m = MLP(device=device)
    sd = {k: v.clone() for k, v in MLP(device=device).state_dict().items()}
    del sd["fc2.bias"]
    sd["head.weight"] = mg.zeros(1, device=device)
    before = m.fc2.bias.detach().numpy().copy()
    res = m.load_state_dict(sd, strict=False)
    assert res.missing_keys == ["fc2.bias"] and res.unexpected_keys == ["head.weight"]
    missing, unexpected = res
    assert missing == ["fc2.bias"]
    np.testing.assert_array_equal(m.fc1.weight.detach().numpy(), sd["fc1.weight"].numpy())
    np.testing.assert_array_equal(m.fc2.bias.detach().numpy(), before)
    sd["fc1.bias"] = mg.zeros(7, device=device)
    with pytest.raises(nn.StateDictError, match="size mismatch for fc1.bias"):
        m.load_state_dict(sd, strict=False)


def test_load_state_dict_accepts_numpy_and_casts_dtype(device):
    m = nn.Linear(3, 2, device=device)
    sd = {"weight": np.ones((2, 3)), "bias": mg.tensor([1.0, 2.0], dtype=mg.float64, device=device)}
    m.load_state_dict(sd)
    assert m.weight.dtype == mg.float32 and m.weight.device == m.bias.device == device
    np.testing.assert_array_equal(m.bias.detach().numpy(), [1, 2])
    v0 = m.weight._version
    m.load_state_dict(sd)
    assert m.weight._version > v0


def test_state_dict_round_trip_across_devices(device):
    x = np.random.default_rng(0).standard_normal((6, 4)).astype(np.float32)
    src = MLP()
    ref = src(mg.tensor(x)).detach().numpy()
    dst = MLP().to(device)
    dst.load_state_dict(src.state_dict())                  # cpu tensors into a model on ``device``
    assert all(v.device == device for v in dst.state_dict().values())
    np.testing.assert_allclose(dst(mg.tensor(x, device=device)).detach().numpy(), ref, rtol=1e-6, atol=1e-7)
    back = MLP()
    back.load_state_dict(dst.state_dict())                 # and back to the cpu
    assert all(v.device == mg.device("cpu") for v in back.state_dict().values())
    np.testing.assert_array_equal(back(mg.tensor(x)).detach().numpy(), ref)
    moved = copy.deepcopy(src).to(device)                  # moving the whole model keeps its values
    np.testing.assert_allclose(moved(mg.tensor(x, device=device)).detach().cpu().numpy(), ref, rtol=1e-6, atol=1e-7)


# --- hooks ----------------------------------------------------------------------------------------
def test_forward_pre_and_post_hooks_and_removal():
    m = nn.Linear(3, 3)
    calls = []

    def pre(mod, args):
        calls.append(("pre", mod, args[0].shape))
        return (args[0] * 0,)

    def post(mod, args, out):
        calls.append(("post", out.shape))
        return out + 1

    h1 = m.register_forward_pre_hook(pre)
    h2 = m.register_forward_hook(post)
    y = m(mg.randn(2, 3))
    expected = m.bias.detach().numpy() + 1
    np.testing.assert_allclose(y.detach().numpy(), np.broadcast_to(expected, (2, 3)), rtol=1e-6)
    assert calls[0][0] == "pre" and calls[0][1] is m and calls[1] == ("post", (2, 3))
    h1.remove()
    h2.remove()
    x = mg.randn(2, 3)
    np.testing.assert_allclose(m(x).detach().numpy(), (x @ m.weight.T + m.bias).detach().numpy(), rtol=1e-6)
    assert len(calls) == 2


def test_hooks_with_kwargs_order_and_context_manager():
    m = nn.Identity()
    order = []
    m.register_forward_hook(lambda mod, a, o: order.append("a"))
    m.register_forward_hook(lambda mod, a, o: order.append("b"), prepend=True)
    with m.register_forward_pre_hook(lambda mod, a, kw: (a, {}), with_kwargs=True):
        m(mg.zeros(1))
    assert order == ["b", "a"]
    assert not m._forward_pre_hooks
    seen = {}
    m.register_forward_hook(lambda mod, a, kw, out: seen.update(kw), with_kwargs=True)

    class Kw(nn.Module):
        def forward(self, x, scale=1.0):
            return x * scale
    k = Kw()
    k.register_forward_hook(lambda mod, a, kw, out: seen.update(kw), with_kwargs=True)
    out = k(mg.ones(2), scale=3.0)
    assert seen == {"scale": 3.0} and out.numpy().tolist() == [3.0, 3.0]


def test_hook_sees_intermediate_activations(device):
    m = nn.Sequential(nn.Linear(4, 5, device=device), nn.ReLU(), nn.Linear(5, 2, device=device))
    acts = {}
    for name, mod in m.named_children():
        mod.register_forward_hook(lambda mod, a, out, name=name: acts.__setitem__(name, out.shape))
    m(mg.randn(7, 4, device=device))
    assert acts == {"0": (7, 5), "1": (7, 5), "2": (7, 2)}


# --- dtype / device -------------------------------------------------------------------------------
def test_to_dtype_keeps_parameter_identity_and_integer_buffers(device):
    m = nn.Sequential(nn.Linear(3, 4, device=device), nn.BatchNorm1d(4, device=device))
    params = list(m.parameters())
    opt_ref = params[0]
    m(mg.randn(5, 3, device=device)).sum().backward()
    assert m.double() is m
    assert [p is q for p, q in zip(m.parameters(), params)] == [True] * 4
    assert opt_ref.dtype == mg.float64 and opt_ref.grad.dtype == mg.float64
    assert m[1].running_mean.dtype == mg.float64
    assert m[1].num_batches_tracked.dtype == mg.int64
    y = m(mg.randn(5, 3, dtype=mg.float64, device=device))
    assert y.dtype == mg.float64
    m.float()
    assert all(p.dtype == mg.float32 for p in m.parameters())
    m.to(mg.float64)
    assert all(p.dtype == mg.float64 for p in m.parameters())
    m.to(device, dtype="float32")
    assert all(p.dtype == mg.float32 and p.device == device for p in m.parameters())
    with pytest.raises(TypeError, match="floating point"):
        m.to(mg.int64)


def test_to_device(device):
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    p0 = m[0].weight
    m.to(device)
    assert m[0].weight is p0 and p0.device == device
    assert m[1].running_mean.device == device
    y = m(mg.randn(5, 3, device=device))
    assert y.device == device
    m.cpu()
    assert p0.device == mg.device("cpu")


def test_deepcopy_module(device):
    m = MLP(device=device)
    m2 = copy.deepcopy(m)
    assert m2.fc1.weight is not m.fc1.weight and m2.fc1.weight.device == device
    x = mg.randn(3, 4, device=device)
    np.testing.assert_array_equal(m(x).detach().numpy(), m2(x).detach().numpy())
    m2(x).sum().backward()
    assert m.fc1.weight.grad is None and m2.fc1.weight.grad is not None


# --- repr -----------------------------------------------------------------------------------------
def test_repr_tree():
    m = MLP()
    assert repr(m) == (
        "MLP(\n"
        "  (fc1): Linear(in_features=4, out_features=8, bias=True)\n"
        "  (act): ReLU()\n"
        "  (fc2): Linear(in_features=8, out_features=3, bias=True)\n"
        ")")
    s = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.Sequential(nn.Flatten(), nn.Dropout(0.1)))
    assert repr(s) == (
        "Sequential(\n"
        "  (0): Conv2d(1, 4, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))\n"
        "  (1): BatchNorm2d(4, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)\n"
        "  (2): Sequential(\n"
        "    (0): Flatten(start_dim=1, end_dim=-1)\n"
        "    (1): Dropout(p=0.1, inplace=False)\n"
        "  )\n"
        ")")
    assert repr(nn.GELU(approximate="tanh")) == "GELU(approximate='tanh')"
    assert repr(nn.LayerNorm(5)) == "LayerNorm((5,), eps=1e-05, elementwise_affine=True)"
    assert repr(nn.Embedding(10, 3, padding_idx=0)) == "Embedding(10, 3, padding_idx=0)"


def test_forward_missing_raises():
    with pytest.raises(NotImplementedError, match="forward"):
        nn.Module()(mg.zeros(1))
