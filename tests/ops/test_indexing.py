"""Indexing, gather, one_hot, setitem: values vs NumPy, scatter-add backward, gradchecks."""
import numpy as np
import pytest

import minigrad as mg
from minigrad.autograd import gradcheck
from minigrad.errors import DTypeError, OpIndexError, ShapeError


def T(arr, device, grad=True, dtype=np.float64):
    return mg.tensor(np.asarray(arr, dtype=dtype), device=device, requires_grad=grad)


def host(t):
    return t.detach().cpu().numpy()


DATA = np.arange(60.0).reshape(3, 4, 5) / 7.0

INDICES = {
    "int": 1,
    "neg_int": -1,
    "slice": slice(1, None),
    "step": (slice(None), slice(None, None, 2)),
    "neg_step": (slice(None, None, -1), 0),
    "none": (None, 0),
    "ellipsis": (Ellipsis, 2),
    "ellipsis_none": (0, Ellipsis, None),
    "mixed": (1, slice(1, 3), -2),
    "int_list": [0, 2, 2],
    "int_array": (slice(None), np.array([3, 0, 3, 1])),
    "two_arrays": (np.array([0, 2]), np.array([1, 3])),
    "array_2d": np.array([[0, 1], [2, 0]]),
    "bool_mask": np.array([True, False, True]),
    "bool_full": DATA > 3.0,
    "bool_and_slice": (np.array([False, True, True]), slice(0, 2)),
    "array_and_none": (None, np.array([1, 1]), Ellipsis),
}


@pytest.mark.parametrize("name", sorted(INDICES))
def test_getitem_values_and_gradcheck(name, device):
    index = INDICES[name]
    x = T(DATA, device)
    out = x[index]
    want = DATA[index]
    assert out.shape == want.shape
    np.testing.assert_array_equal(host(out), want)
    assert gradcheck(lambda t: t[index], (x,))


@pytest.mark.parametrize("name", sorted(INDICES))
def test_getitem_with_tensor_indices(name, device):
    index = INDICES[name]
    items = index if isinstance(index, tuple) else (index,)
    conv = tuple(mg.tensor(i, device=device) if isinstance(i, (np.ndarray, list)) else i for i in items)
    conv = conv if isinstance(index, tuple) else conv[0]
    x = mg.tensor(DATA, device=device)
    np.testing.assert_array_equal(host(x[conv]), DATA[index])


def test_repeated_indices_accumulate(device):
    x = T([1.0, 2.0, 3.0], device)
    y = x[[0, 0, 2, 0]]
    (y * mg.tensor([1.0, 10.0, 100.0, 1000.0], device=device, dtype=mg.float64)).sum().backward()
    np.testing.assert_array_equal(host(x.grad), [1011.0, 0.0, 100.0])
    z = T(np.ones((2, 3)), device)
    z[mg.tensor([1, 1, 1], device=device)].sum().backward()
    np.testing.assert_array_equal(host(z.grad), [[0, 0, 0], [3, 3, 3]])
    w = T(np.ones((2, 3)), device)
    w[np.array([0, 0]), np.array([2, 2])].sum().backward()
    np.testing.assert_array_equal(host(w.grad), [[0, 0, 2], [0, 0, 0]])


def test_repeated_negative_and_positive_indices_hit_the_same_row(device):
    """-1 and n-1 name the same row: their gradients must add up (the sorted row scatter normalises them)."""
    x = T(np.zeros((4, 2)), device)
    g = np.arange(10.0).reshape(5, 2)
    x[mg.tensor([-1, 3, 0, -4, -1], device=device)].backward(mg.tensor(g, device=device))
    np.testing.assert_array_equal(host(x.grad), [g[2] + g[3], [0, 0], [0, 0], g[0] + g[1] + g[4]])
    e = T(np.zeros((3, 2)), device)
    mask = mg.tensor([True, True, True], device=device)       # a bool index as long as its values: not rows
    (e[mask] * mg.tensor(g[:3], device=device)).sum().backward()
    np.testing.assert_array_equal(host(e.grad), g[:3])


def test_bool_mask_backward(device):
    x = T([1.0, -2.0, 3.0, -4.0], device)
    (x[x > 0] * 2).sum().backward()
    np.testing.assert_array_equal(host(x.grad), [2.0, 0.0, 2.0, 0.0])


def test_index_with_integer_tensor_scalar_and_tensor_int(device):
    x = T(DATA, device)
    i = mg.tensor(2, device=device)
    np.testing.assert_array_equal(host(x[i]), DATA[2])
    np.testing.assert_array_equal(host(x[1, i]), DATA[1, 2])


def test_basic_index_is_view_advanced_is_copy(device):
    x = mg.tensor(DATA, device=device)
    v = x[1:, 0]
    assert v._version_counter is x._version_counter
    c = x[[0, 1]]
    assert c._version_counter is not x._version_counter
    assert x[np.int64(1)]._version_counter is x._version_counter  # NumPy integers index like ints
    with mg.no_grad():
        x.mul_(0)
    assert host(v).sum() == 0.0
    assert host(c).sum() != 0.0


def test_index_errors(device):
    x = mg.tensor(DATA, device=device)
    with pytest.raises(OpIndexError, match="getitem"):
        x[3]
    with pytest.raises(OpIndexError, match="getitem"):
        x[0, 0, 0, 0]
    with pytest.raises(OpIndexError):
        x[[0, 7]]
    with pytest.raises(DTypeError, match="float"):
        x[1.5]
    with pytest.raises(DTypeError, match="float32"):
        x[mg.tensor([0.0, 1.0], device=device)]
    with pytest.raises(DTypeError):
        x[np.array([0.5])]


# --- setitem --------------------------------------------------------------------------------------
def test_setitem_without_grad(device):
    x = mg.zeros(3, 4, device=device)
    x[0] = 1.0
    x[1, 1:3] = mg.tensor([2.0, 3.0], device=device)
    x[:, -1] = mg.tensor([7.0, 8.0, 9.0], device=device)
    x[x == 0] = -1.0
    want = np.array([[1, 1, 1, 7], [-1, 2, 3, 8], [-1, -1, -1, 9]], dtype=np.float32)
    np.testing.assert_array_equal(host(x), want)
    assert x._version == 4
    x[mg.tensor([0, 2], device=device)] = 0.0
    np.testing.assert_array_equal(host(x)[[0, 2]], 0.0)


def test_setitem_on_a_non_leaf_records_the_graph(device):
    x = T([1.0, 2.0, 3.0, 4.0], device)
    v = T([10.0, 20.0], device)
    y = x * 2
    y[1:3] = v
    np.testing.assert_array_equal(host(y), [2.0, 10.0, 20.0, 8.0])
    assert y.grad_fn is not None and y._version == 1
    (y * mg.tensor([1.0, 2.0, 3.0, 4.0], device=device, dtype=mg.float64)).sum().backward()
    np.testing.assert_array_equal(host(x.grad), [2.0, 0.0, 0.0, 8.0])
    np.testing.assert_array_equal(host(v.grad), [2.0, 3.0])


def test_setitem_broadcast_value_gets_summed_grad(device):
    x = T(np.ones((3, 4)), device)
    v = T([5.0], device)
    y = x * 1
    y[:, 1] = v
    y.sum().backward()
    np.testing.assert_array_equal(host(v.grad), [3.0])
    np.testing.assert_array_equal(host(x.grad)[:, 1], 0.0)


def test_setitem_gradcheck(device):
    x = T(np.random.default_rng(0).standard_normal((3, 4)), device)
    v = T(np.random.default_rng(1).standard_normal((4,)), device)

    def fn(a, b):
        y = a * 1
        y[1] = b
        y[mg.tensor([True, False, True], device=device), 0] = 0.0
        return y
    assert gradcheck(fn, (x, v))


def test_setitem_into_plain_tensor_with_grad_value(device):
    x = mg.zeros(4, device=device, dtype=mg.float64)
    v = T([1.5, 2.5], device)
    x[1:3] = v
    assert x.requires_grad and x.grad_fn is not None
    (x * mg.tensor([1.0, 2.0, 3.0, 4.0], device=device, dtype=mg.float64)).sum().backward()
    np.testing.assert_array_equal(host(v.grad), [2.0, 3.0])


def test_setitem_value_of_another_dtype_gets_grad_in_its_dtype(device):
    y = mg.ones(3, device=device) * 1  # float32
    w = T([2.0], device)                # float64
    y[0:1] = w
    assert y.dtype == mg.float32
    (y * 3).sum().backward()
    assert w.grad.dtype == mg.float64
    np.testing.assert_array_equal(host(w.grad), [3.0])


def test_setitem_on_leaf_requiring_grad_raises(device):
    x = T([1.0, 2.0], device)
    with pytest.raises(mg.errors.AutogradError, match="setitem"):
        x[0] = 0.0
    with mg.no_grad():
        x[0] = 5.0
    assert host(x)[0] == 5.0


def test_setitem_shape_mismatch(device):
    x = mg.zeros(3, 4, device=device)
    with pytest.raises(ShapeError, match="setitem"):
        x[0] = mg.ones(3, device=device)


# --- gather ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather_values_and_gradcheck(dim, device):
    rng = np.random.default_rng(3)
    data = rng.standard_normal((3, 4))
    idx_shape = (2, 4) if dim == 0 else (2, 3)  # smaller than the input outside ``dim`` is allowed
    idx_np = rng.integers(0, data.shape[dim], idx_shape)
    x = T(data, device)
    idx = mg.tensor(idx_np, device=device)
    out = x.gather(dim, idx)
    np.testing.assert_array_equal(host(out), np.take_along_axis(data if dim == 0 else data[:2], idx_np, axis=dim))
    assert gradcheck(lambda t: mg.gather(t, dim, idx), (x,))


def test_gather_repeated_indices_accumulate(device):
    x = T([[1.0, 2.0, 3.0]], device)
    x.gather(1, mg.tensor([[2, 2, 0, 2]], device=device)).sum().backward()
    np.testing.assert_array_equal(host(x.grad), [[1.0, 0.0, 3.0]])


def test_gather_errors(device):
    x = mg.zeros(2, 3, device=device)
    with pytest.raises(DTypeError, match="gather"):
        x.gather(1, mg.zeros(2, 3, device=device))
    with pytest.raises(OpIndexError, match=r"gather: index out of range.*size 3"):
        x.gather(1, mg.tensor([[0, 3], [0, 0]], device=device))
    with pytest.raises(ShapeError, match="gather"):
        x.gather(1, mg.tensor([0, 1], device=device))


# --- one_hot -------------------------------------------------------------------------------------------
def test_one_hot(device):
    t = mg.tensor([[0, 2], [1, 1]], device=device)
    out = mg.one_hot(t, 4)
    assert out.shape == (2, 2, 4) and out.dtype == mg.int64
    np.testing.assert_array_equal(host(out), np.eye(4, dtype=np.int64)[[[0, 2], [1, 1]]])
    assert not out.requires_grad
    assert mg.one_hot(mg.tensor([0, 3], device=device)).shape == (2, 4)
    with pytest.raises(OpIndexError, match="one_hot"):
        mg.one_hot(mg.tensor([0, 4], device=device), 4)
    with pytest.raises(OpIndexError, match="one_hot"):
        mg.one_hot(mg.tensor([-1, 0], device=device), 4)
    with pytest.raises(DTypeError, match="one_hot"):
        mg.one_hot(mg.tensor([0.0, 1.0], device=device), 4)
