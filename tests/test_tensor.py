"""Tensor: construction and dtype rules, factories and seeds, dtypes, metadata, repr, operators, indexing."""
import numpy as np
import pytest

import minigrad as mg
from minigrad.errors import ArgumentError, AutogradError, DTypeError, ShapeError


def host(t):
    return t.detach().cpu().numpy()


# --- construction --------------------------------------------------------------------------------
@pytest.mark.parametrize("data,dtype", [(1.5, mg.float32), ([1.0, 2.0], mg.float32), ([[1, 2]], mg.int64), (3, mg.int64),
                                        (True, mg.bool), ([True, False], mg.bool), ([1, 2.5], mg.float32),
                                        ([], mg.float32), (np.array([1.0]), mg.float64),
                                        (np.array([1], dtype=np.int32), mg.int32),
                                        (np.array([1.0], dtype=np.float16), mg.float16),
                                        (np.array([1], dtype=np.uint8), mg.uint8), (np.float64(2.0), mg.float64),
                                        (np.float32(2.0), mg.float32), (np.int64(3), mg.int64)])
def test_tensor_dtype_rules(data, dtype, device):
    t = mg.tensor(data, device=device)
    assert t.dtype == dtype
    np.testing.assert_array_equal(host(t), np.asarray(data))
    assert t.device == device
    assert t.is_leaf and not t.requires_grad and t.grad is None and t.grad_fn is None


def test_tensor_copies_its_input(device):
    a = np.array([1.0, 2.0])
    t = mg.tensor(a, device=device)
    a[0] = 99.0
    assert host(t)[0] == 1.0
    u = mg.tensor(t)
    u.array[1] = -1.0
    assert host(t)[1] == 2.0
    assert mg.from_numpy(a).dtype == mg.float64


def test_tensor_explicit_dtype(device):
    for spec in (mg.float64, "float64", np.float64, np.dtype("float64"), float):
        assert mg.tensor([1, 2], dtype=spec, device=device).dtype == mg.float64
    assert mg.tensor([1.7, -2.2], dtype=mg.int64, device=device).tolist() == [1, -2]
    assert mg.tensor([0, 2], dtype=bool, device=device).tolist() == [False, True]


def test_tensor_from_tensors_and_nested(device):
    t = mg.tensor([mg.tensor(1.0), mg.tensor(2.0)], device=device)
    assert t.tolist() == [1.0, 2.0]
    src = mg.tensor([1.0, 2.0], requires_grad=True)
    c = mg.tensor(src)
    assert not c.requires_grad and c.grad_fn is None


def test_tensor_class_constructor(device):
    t = mg.Tensor([1.0, 2.0], requires_grad=True, device=device)
    assert isinstance(t, mg.Tensor) and t.requires_grad and t.is_leaf
    (t * 2).sum().backward()
    np.testing.assert_array_equal(host(t.grad), [2.0, 2.0])
    assert mg.is_tensor(t) and not mg.is_tensor([1])


def test_requires_grad_only_for_floats(device):
    with pytest.raises(DTypeError, match=r"int64"):
        mg.tensor([1, 2], requires_grad=True, device=device)
    with pytest.raises(DTypeError):
        mg.zeros(2, dtype=mg.int32, device=device, requires_grad=True)
    t = mg.tensor([1.0], device=device).requires_grad_()
    assert t.requires_grad
    assert t.requires_grad_(False).requires_grad is False


# --- factories ----------------------------------------------------------------------------------------
def test_zeros_ones_empty_full(device):
    z = mg.zeros(2, 3, device=device)
    assert z.shape == (2, 3) and z.dtype == mg.float32 and host(z).sum() == 0
    assert mg.zeros((2, 3), device=device).shape == (2, 3)
    assert mg.zeros([4], device=device).shape == (4,)
    assert mg.zeros((), device=device).shape == ()
    o = mg.ones(3, dtype=mg.int64, device=device)
    assert o.dtype == mg.int64 and o.tolist() == [1, 1, 1]
    e = mg.empty(4, 5, device=device)
    assert e.shape == (4, 5) and e.dtype == mg.float32
    f = mg.full((2, 2), 7.5, device=device)
    assert f.dtype == mg.float32 and f.tolist() == [[7.5, 7.5], [7.5, 7.5]]
    assert mg.full((2,), 3, device=device).dtype == mg.int64
    assert mg.full((2,), True, device=device).dtype == mg.bool
    assert mg.full(3, 1.0, device=device).shape == (3,)
    assert mg.ones(2, requires_grad=True, device=device).requires_grad
    with pytest.raises(ArgumentError, match="negative"):
        mg.zeros(2, -1, device=device)


def test_arange_linspace_eye(device):
    a = mg.arange(5, device=device)
    assert a.dtype == mg.int64 and a.tolist() == [0, 1, 2, 3, 4]
    assert mg.arange(2, 8, 3, device=device).tolist() == [2, 5]
    assert mg.arange(5, 0, -2, device=device).tolist() == [5, 3, 1]
    f = mg.arange(0, 1, 0.25, device=device)
    assert f.dtype == mg.float32 and f.tolist() == [0.0, 0.25, 0.5, 0.75]
    assert mg.arange(3, dtype=mg.float64, device=device).dtype == mg.float64
    with pytest.raises(ArgumentError, match="arange"):
        mg.arange(0, 5, 0)
    ls = mg.linspace(0, 1, 5, device=device)
    assert ls.dtype == mg.float32
    np.testing.assert_allclose(host(ls), np.linspace(0, 1, 5))
    np.testing.assert_array_equal(host(mg.eye(3, device=device)), np.eye(3))
    np.testing.assert_array_equal(host(mg.eye(2, 3, device=device)), np.eye(2, 3))
    assert mg.eye(2, dtype=mg.int64, device=device).dtype == mg.int64


def test_random_factories(device):
    r = mg.rand(1000, device=device)
    assert r.dtype == mg.float32 and 0 <= host(r).min() and host(r).max() < 1
    n = mg.randn(2000, dtype=mg.float64, device=device)
    assert n.dtype == mg.float64 and abs(host(n).mean()) < 0.1 and abs(host(n).std() - 1) < 0.1
    i = mg.randint(3, 7, (500,), device=device)
    assert i.dtype == mg.int64 and set(np.unique(host(i))) == {3, 4, 5, 6}
    assert mg.randint(5, (3, 2), device=device).shape == (3, 2)  # randint(high, size)
    assert mg.randint(0, 5, size=4, device=device).shape == (4,)
    p = mg.randperm(6, device=device)
    assert sorted(p.tolist()) == list(range(6))
    with pytest.raises(ArgumentError, match="randint"):
        mg.randint(5, 5, (2,))
    with pytest.raises(DTypeError, match="rand"):
        mg.rand(2, dtype=mg.int64)
    with pytest.raises(DTypeError, match="randn"):
        mg.randn_like(mg.tensor([1, 2]))


def test_like_factories(device):
    ref = mg.tensor(np.zeros((2, 3)), device=device)
    for fn in (mg.zeros_like, mg.ones_like, mg.empty_like, mg.randn_like, mg.rand_like):
        t = fn(ref)
        assert t.shape == (2, 3) and t.dtype == mg.float64 and t.device == device
    assert host(mg.ones_like(ref)).sum() == 6
    assert host(mg.zeros_like(ref)).sum() == 0
    assert mg.zeros_like(ref, dtype=mg.int32).dtype == mg.int32
    assert mg.full_like(ref, 2.5).tolist() == [[2.5] * 3] * 2
    assert mg.ones_like(ref, requires_grad=True).requires_grad


def test_manual_seed_reproducibility():
    mg.manual_seed(123)
    a = (mg.rand(5), mg.randn(3, 2), mg.randint(0, 100, (4,)), mg.randperm(5))
    mg.manual_seed(123)
    b = (mg.rand(5), mg.randn(3, 2), mg.randint(0, 100, (4,)), mg.randperm(5))
    for x, y in zip(a, b):
        assert mg.equal(x, y)
    mg.manual_seed(124)
    assert not mg.equal(mg.rand(5), a[0])
    assert mg.initial_seed() == 124


def test_generator_is_independent_of_global_seed():
    g1 = mg.Generator().manual_seed(7)
    g2 = mg.Generator().manual_seed(7)
    mg.manual_seed(0)
    a = mg.randn(4, generator=g1)
    mg.rand(10)  # the global generator advancing does not affect g2
    b = mg.randn(4, generator=g2)
    assert mg.equal(a, b)
    assert not mg.equal(mg.randn(4, generator=g1), a)
    state = g1.get_state()
    c = mg.rand(3, generator=g1)
    g1.set_state(state)
    assert mg.equal(c, mg.rand(3, generator=g1))


def test_rng_state_roundtrip():
    mg.manual_seed(5)
    state = mg.get_rng_state()
    a = mg.randn(3)
    mg.set_rng_state(state)
    assert mg.equal(a, mg.randn(3))


def test_inplace_random_fill_uses_seed():
    mg.manual_seed(1)
    a = mg.empty(5).uniform_(-2, 2)
    mg.manual_seed(1)
    b = mg.empty(5).uniform_(-2, 2)
    assert mg.equal(a, b) and host(a).min() >= -2 and host(a).max() < 2
    n = mg.zeros(2000, dtype=mg.float64).normal_(3.0, 0.5)
    assert abs(host(n).mean() - 3.0) < 0.05 and n.dtype == mg.float64


# --- dtypes ----------------------------------------------------------------------------------------------
def test_dtype_objects():
    assert (mg.float16, mg.float32, mg.float64, mg.int32, mg.int64, mg.bool) == \
        (mg.half, mg.float, mg.double, mg.int, mg.long, mg.bool)
    assert repr(mg.float32) == "minigrad.float32" and mg.float32.name == "float32"
    assert mg.float64.is_floating_point and not mg.int64.is_floating_point
    assert mg.float16.itemsize == 2 and mg.int64.itemsize == 8
    assert mg.get_default_dtype() == mg.float32


@pytest.mark.parametrize("method,dtype", [("float", mg.float32), ("double", mg.float64), ("half", mg.float16),
                                          ("long", mg.int64), ("int", mg.int32), ("bool", mg.bool)])
def test_conversion_methods(method, dtype, device):
    t = mg.tensor([0.0, 1.7, -2.2], device=device)
    out = getattr(t, method)()
    assert out.dtype == dtype
    np.testing.assert_array_equal(host(out), np.array([0.0, 1.7, -2.2], dtype=np.float32).astype(dtype.np_dtype))


def test_to_dtype_and_type(device):
    t = mg.tensor([1.5, 2.5], device=device)
    assert t.to(mg.float64).dtype == mg.float64
    assert t.to("int64").tolist() == [1, 2]
    assert t.to(dtype=mg.float16).dtype == mg.float16
    assert t.to(mg.float32) is t  # no-op returns self
    assert t.to(mg.float32, copy=True) is not t
    assert t.to(mg.tensor([1])).dtype == mg.int64
    assert t.to(device) is t
    assert t.type() == mg.float32 and t.type(mg.float64).dtype == mg.float64
    assert t.type_as(mg.tensor([1], dtype=mg.int32)).dtype == mg.int32
    with pytest.raises(TypeError):
        t.to(foo=1)


def test_cast_is_differentiable(device):
    x = mg.tensor([1.0, 2.0], requires_grad=True, device=device)
    y = x.double() * 3
    assert y.dtype == mg.float64
    y.sum().backward()
    assert x.grad.dtype == mg.float32
    np.testing.assert_array_equal(host(x.grad), [3.0, 3.0])
    assert not x.long().requires_grad


def test_unsupported_dtypes_are_refused():
    with pytest.raises(DTypeError, match="complex"):
        mg.tensor(np.zeros(2, dtype=np.complex64))
    with pytest.raises(DTypeError, match="uint64"):
        mg.tensor(np.zeros(2, dtype=np.uint64))
    with pytest.raises(DTypeError, match="foo"):
        mg.zeros(2, dtype="foo")
    with pytest.raises(DTypeError):
        mg.tensor("text")
    with pytest.raises(DTypeError):
        mg.tensor([None, 1])
    with pytest.raises(ShapeError, match="ragged"):
        mg.tensor([[1, 2], [3]])


# --- metadata and conversion ------------------------------------------------------------------------------
def test_metadata(device):
    x = mg.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True, device=device)
    assert x.shape == (2, 3) and x.size() == (2, 3) and x.size(1) == 3 and x.ndim == 2 and x.dim() == 2
    assert x.numel() == 6 and mg.numel(x) == 6 and len(x) == 2
    assert x.dtype == mg.float64 and x.device == device and x.is_floating_point()
    assert x.element_size() == 8 and x.itemsize == 8 and x.nbytes == 48
    assert x.requires_grad and x.is_leaf and x.grad is None and x.grad_fn is None
    y = x * 2
    assert y.requires_grad and not y.is_leaf and y.grad_fn is not None
    assert [r.tolist() for r in x.detach()] == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]


def test_item_numpy_tolist(device):
    assert mg.tensor(2.5, device=device).item() == 2.5
    assert isinstance(mg.tensor([[3]], device=device).item(), int)
    assert float(mg.tensor([1.5], device=device)) == 1.5 and int(mg.tensor(2.9, device=device)) == 2
    assert bool(mg.tensor([True], device=device)) is True
    assert [10, 20, 30][mg.tensor(1, device=device)] == 20
    x = mg.tensor([[1.0, 2.0]], device=device)
    assert x.tolist() == [[1.0, 2.0]]
    arr = x.cpu().numpy()
    assert isinstance(arr, np.ndarray) and arr.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(x), [[1.0, 2.0]])
    with pytest.raises(ShapeError, match=r"item.*\(1, 2\)"):
        x.item()
    with pytest.raises(ShapeError, match="ambiguous"):
        bool(x)
    with pytest.raises(TypeError):
        len(mg.tensor(1.0))
    g = mg.tensor([1.0], requires_grad=True)
    with pytest.raises(AutogradError, match="detach"):
        g.numpy()
    with mg.no_grad():
        assert g.numpy().tolist() == [1.0]


def test_detach_clone_requires_grad_(device):
    x = mg.tensor([1.0, 2.0], requires_grad=True, device=device)
    y = x * 3
    d = y.detach()
    assert not d.requires_grad and d.grad_fn is None and d.is_leaf
    np.testing.assert_array_equal(host(d), [3.0, 6.0])
    c = x.clone()
    assert c.requires_grad and c.grad_fn is not None and c.array is not x.array
    (c * 2).sum().backward()
    np.testing.assert_array_equal(host(x.grad), [2.0, 2.0])
    with pytest.raises(AutogradError, match="non-leaf"):
        y.requires_grad_(False)
    d.requires_grad_()
    assert d.requires_grad and d.is_leaf
    y.detach_()
    assert y.grad_fn is None and not y.requires_grad


def test_repr(device):
    assert repr(mg.tensor([1.0, 2.0])) == "tensor([1., 2.])"
    assert repr(mg.tensor([1, 2])) == "tensor([1, 2])"
    assert repr(mg.tensor(3.5)) == "tensor(3.5000)"              # PyTorch's format: _tensor_str.py
    assert repr(mg.tensor([True])) == "tensor([True])"
    assert repr(mg.tensor([1.0], dtype=mg.float64)) == "tensor([1.], dtype=minigrad.float64)"
    assert repr(mg.tensor([1.0], requires_grad=True)) == "tensor([1.], requires_grad=True)"
    x = mg.tensor([1.0], requires_grad=True)
    assert repr(x * 2) == "tensor([2.], grad_fn=<Mul>)"  # PyTorch: <MulBackward0>
    assert "..." in repr(mg.arange(1001)) and "..." not in repr(mg.arange(1000))   # PyTorch: > 1000
    assert repr(mg.tensor([[1.0, 2.0], [3.0, 4.0]])) == "tensor([[1., 2.],\n        [3., 4.]])"
    if device.type != "cpu":
        assert f"device='{device}'" in repr(mg.ones(1, device=device))


# --- python operators ---------------------------------------------------------------------------------
def test_operators_and_their_reflections(device):
    x = mg.tensor([1.0, 2.0, 4.0], device=device)
    v = np.array([1.0, 2.0, 4.0], dtype=np.float32)
    pairs = [(x + 2, v + 2), (2 + x, 2 + v), (x - 2, v - 2), (2 - x, 2 - v), (x * 3, v * 3), (3 * x, 3 * v),
             (x / 2, v / 2), (2 / x, 2 / v), (x ** 2, v ** 2), (2 ** x, 2 ** v), (-x, -v), (+x, v),
             (abs(-x), v), (x // 3, v // 3), (x % 3, v % 3), (x @ x, v @ v)]
    for got, want in pairs:
        assert isinstance(got, mg.Tensor)
        np.testing.assert_allclose(host(got), want, rtol=1e-6)


def test_comparisons_give_bool_without_grad(device):
    x = mg.tensor([1.0, 2.0, 3.0], requires_grad=True, device=device)
    for got, want in [(x < 2, [True, False, False]), (x <= 2, [True, True, False]), (x > 2, [False, False, True]),
                      (x >= 2, [False, True, True]), (x == 2, [False, True, False]), (x != 2, [True, False, True]),
                      (2 < x, [False, False, True]), (x == x, [True, True, True])]:
        assert got.dtype == mg.bool and not got.requires_grad and got.grad_fn is None
        assert got.tolist() == want
    assert mg.equal(x.detach(), mg.tensor([1.0, 2.0, 3.0], device=device))
    assert mg.allclose(x.detach(), x.detach() + 1e-9)


def test_inplace_operators_keep_identity(device):
    x = mg.tensor([1.0, 2.0], device=device)
    y = x
    x += 1
    x *= 3
    x -= 1
    x /= 5
    assert x is y and x._version == 4
    np.testing.assert_allclose(host(x), [1.0, 1.6])
    with pytest.raises(DTypeError, match="add_"):
        mg.tensor([1, 2], device=device).add_(1.5)
    with pytest.raises(ShapeError, match="add_"):
        mg.tensor([1.0, 2.0], device=device).add_(mg.ones(2, 2, device=device))


def test_tensor_is_hashable_and_usable_as_dict_key(device):
    a, b = mg.zeros(1, device=device), mg.zeros(1, device=device)
    d = {a: 1, b: 2}
    assert d[a] == 1 and d[b] == 2


# --- indexing ----------------------------------------------------------------------------------------------
def test_indexing_forms(device):
    data = np.arange(24.0).reshape(2, 3, 4)
    x = mg.tensor(data, device=device)
    for index in [0, -1, (1, 2), (1, 2, 3), slice(None, 1), (slice(None), 1), (Ellipsis, 0), (None, 1),
                  (0, None, slice(1, 3)), [1, 0], ([0, 1], [2, 0]), data[:, 0, 0] > 5,
                  (slice(None), np.array([2, 2, 0]))]:
        np.testing.assert_array_equal(host(x[index]), data[index])
    np.testing.assert_array_equal(host(x[mg.tensor([1, 1], device=device)]), data[[1, 1]])
    np.testing.assert_array_equal(host(x[x > 20]), data[data > 20])
    assert x[1, 2, 3].item() == 23.0 and x[1, 2, 3].shape == ()


def test_indexing_backward_scatter_adds(device):
    x = mg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True, device=device)
    (x[[0, 0, 1]].sum() + 10 * x[x > 2].sum() + 100 * x[:, 1].sum() + 1000 * x[None, ..., 0].sum()).backward()
    np.testing.assert_array_equal(host(x.grad), [[1002.0, 102.0], [1011.0, 111.0]])


def test_setitem(device):
    x = mg.zeros(2, 3, device=device)
    x[0] = 1.0
    x[1, 1:] = mg.tensor([5.0, 6.0], device=device)
    x[x == 0] = -1.0
    assert x.tolist() == [[1.0, 1.0, 1.0], [-1.0, 5.0, 6.0]]
    w = mg.tensor([2.0], requires_grad=True, device=device)
    y = mg.zeros(3, device=device)
    y[1:2] = w * 3
    assert y.requires_grad
    (y * 2).sum().backward()
    np.testing.assert_array_equal(host(w.grad), [6.0])
    leaf = mg.zeros(2, requires_grad=True, device=device)
    with pytest.raises(AutogradError):
        leaf[0] = 1.0


def test_is_contiguous_and_stride_follow_pytorch():
    import minigrad.nn.functional as F
    from minigrad.errors import OpIndexError
    x = mg.randn(2, 3, 4)
    assert x.is_contiguous() and x.stride() == (12, 4, 1) and x.stride(-1) == 1
    t = x.transpose(0, 2)
    assert not t.is_contiguous() and t.stride() == (1, 4, 12)
    assert t.contiguous().is_contiguous() and t.contiguous().stride() == (6, 2, 1)
    y = F.conv2d(mg.randn(2, 3, 5, 5), mg.randn(4, 3, 3, 3))       # channels-last memory, NCHW shape
    assert y.shape == (2, 4, 3, 3) and not y.is_contiguous() and y.stride() == (36, 1, 12, 4)
    with pytest.raises(OpIndexError, match="stride"):
        x.stride(3)
