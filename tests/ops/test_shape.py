"""Shape ops: float64 gradchecks, values vs NumPy, views sharing storage and version counters."""
import numpy as np
import pytest

import minigrad as mg
from minigrad.autograd import gradcheck
from minigrad.errors import ArgumentError, OpIndexError, ShapeError


def T(arr, device, grad=True, dtype=np.float64):
    return mg.tensor(np.asarray(arr, dtype=dtype), device=device, requires_grad=grad)


def host(t):
    return t.detach().cpu().numpy()


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


# (function on a tensor, the same on a NumPy array, input shape)
CASES = {
    "reshape": (lambda t: t.reshape(4, 6), lambda a: a.reshape(4, 6), (2, 3, 4)),
    "reshape_tuple": (lambda t: t.reshape((3, -1)), lambda a: a.reshape(3, -1), (2, 3, 4)),
    "reshape_fn": (lambda t: mg.reshape(t, (-1,)), lambda a: a.reshape(-1), (2, 3, 4)),
    "view": (lambda t: t.view(6, 4), lambda a: a.reshape(6, 4), (2, 3, 4)),
    "view_neg": (lambda t: t.view(-1, 2), lambda a: a.reshape(-1, 2), (2, 3, 4)),
    "transpose": (lambda t: t.transpose(0, 2), lambda a: a.swapaxes(0, 2), (2, 3, 4)),
    "transpose_neg": (lambda t: mg.transpose(t, -1, -2), lambda a: a.swapaxes(-1, -2), (2, 3, 4)),
    "t": (lambda t: t.t(), lambda a: a.T, (3, 4)),
    "T": (lambda t: t.T, lambda a: a.T, (2, 3, 4)),
    "mT": (lambda t: t.mT, lambda a: a.swapaxes(-1, -2), (2, 3, 4)),
    "permute": (lambda t: t.permute(2, 0, 1), lambda a: a.transpose(2, 0, 1), (2, 3, 4)),
    "permute_tuple": (lambda t: mg.permute(t, (1, -1, 0)), lambda a: a.transpose(1, 2, 0), (2, 3, 4)),
    "expand": (lambda t: t.expand(2, 3, 4), lambda a: np.broadcast_to(a, (2, 3, 4)), (3, 1)),
    "expand_neg": (lambda t: t.expand(5, -1, 4), lambda a: np.broadcast_to(a, (5, 3, 4)), (3, 1)),
    "expand_as": (lambda t: t.expand_as(mg.zeros(2, 3, 4)), lambda a: np.broadcast_to(a, (2, 3, 4)), (1, 4)),
    "broadcast_to": (lambda t: mg.broadcast_to(t, (2, 3)), lambda a: np.broadcast_to(a, (2, 3)), (3,)),
    "squeeze": (lambda t: t.squeeze(), lambda a: a.squeeze(), (1, 3, 1, 2)),
    "squeeze_dim": (lambda t: t.squeeze(2), lambda a: a.squeeze(2), (1, 3, 1, 2)),
    "squeeze_noop": (lambda t: t.squeeze(1), lambda a: a, (1, 3, 1, 2)),
    "squeeze_tuple": (lambda t: t.squeeze((0, 2)), lambda a: a.squeeze((0, 2)), (1, 3, 1, 2)),
    "unsqueeze": (lambda t: t.unsqueeze(1), lambda a: a[:, None], (3, 2)),
    "unsqueeze_end": (lambda t: t.unsqueeze(-1), lambda a: a[..., None], (3, 2)),
    "unsqueeze_0": (lambda t: mg.unsqueeze(t, 0), lambda a: a[None], (3, 2)),
    "flatten": (lambda t: t.flatten(), lambda a: a.reshape(-1), (2, 3, 4)),
    "flatten_1": (lambda t: t.flatten(1), lambda a: a.reshape(2, -1), (2, 3, 4)),
    "flatten_mid": (lambda t: mg.flatten(t, 0, 1), lambda a: a.reshape(6, 4), (2, 3, 4)),
    "unflatten": (lambda t: t.unflatten(1, (3, 4)), lambda a: a.reshape(2, 3, 4), (2, 12)),
    "repeat": (lambda t: t.repeat(2, 3), lambda a: np.tile(a, (2, 3)), (2, 3)),
    "repeat_newdims": (lambda t: t.repeat(2, 1, 2), lambda a: np.tile(a, (2, 1, 2)), (2, 3)),
    "repeat_1d": (lambda t: t.repeat(3), lambda a: np.tile(a, 3), (4,)),
    "tril": (lambda t: t.tril(), lambda a: np.tril(a), (4, 4)),
    "tril_k": (lambda t: mg.tril(t, -1), lambda a: np.tril(a, -1), (2, 3, 4)),
    "triu": (lambda t: t.triu(), lambda a: np.triu(a), (3, 5)),
    "triu_k": (lambda t: mg.triu(t, diagonal=1), lambda a: np.triu(a, 1), (4, 3)),
    "flip": (lambda t: t.flip(0), lambda a: np.flip(a, 0), (3, 4)),
    "flip_many": (lambda t: mg.flip(t, (0, -1)), lambda a: np.flip(a, (0, 2)), (2, 3, 4)),
    "narrow": (lambda t: t.narrow(1, 1, 2), lambda a: a[:, 1:3], (2, 4)),
    "pad_last": (lambda t: mg.ops.pad(t, (1, 2)), lambda a: np.pad(a, ((0, 0), (1, 2))), (2, 3)),
    "pad_two": (lambda t: mg.ops.pad(t, (1, 0, 0, 2), value=0.5),
                lambda a: np.pad(a, ((0, 0), (0, 2), (1, 0)), constant_values=0.5), (2, 3, 4)),
    "pad_all": (lambda t: mg.ops.pad(t, (1, 1, 2, 2)), lambda a: np.pad(a, ((2, 2), (1, 1))), (2, 3)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_shape_op_values_and_gradcheck(name, device):
    fn, ref, shape = CASES[name]
    data = rand(*shape)
    x = T(data, device)
    out = fn(x)
    want = ref(data)
    assert out.shape == want.shape
    np.testing.assert_array_equal(host(out), want)
    assert gradcheck(fn, (x,))


def test_cat_values_and_gradcheck(device):
    a, b, c = T(rand(2, 3), device), T(rand(4, 3, seed=1), device), T(rand(1, 3, seed=2), device)
    out = mg.cat([a, b, c])
    np.testing.assert_array_equal(host(out), np.concatenate([host(a), host(b), host(c)]))
    assert gradcheck(lambda *xs: mg.cat(xs, dim=0), (a, b, c))
    d, e = T(rand(2, 3), device), T(rand(2, 5), device)
    np.testing.assert_array_equal(host(mg.cat((d, e), dim=-1)), np.concatenate([host(d), host(e)], -1))
    np.testing.assert_array_equal(host(mg.cat((d, e), axis=1)), np.concatenate([host(d), host(e)], 1))
    assert gradcheck(lambda x, y: mg.concat([x, y], 1), (d, e))


def test_cat_with_one_non_grad_input(device):
    a = T(rand(2, 3), device)
    b = T(rand(2, 3), device, grad=False)
    mg.cat([a, b, a]).sum().backward()
    np.testing.assert_array_equal(host(a.grad), np.full((2, 3), 2.0))
    assert b.grad is None


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_stack_values_and_gradcheck(dim, device):
    xs = [T(rand(2, 3, seed=i), device) for i in range(3)]
    out = mg.stack(xs, dim=dim)
    np.testing.assert_array_equal(host(out), np.stack([host(x) for x in xs], axis=dim))
    assert gradcheck(lambda *ts: mg.stack(ts, dim), xs)


def test_split_and_chunk(device):
    data = rand(7, 2)
    x = T(data, device)
    parts = x.split(3)
    assert [p.shape for p in parts] == [(3, 2), (3, 2), (1, 2)]
    np.testing.assert_array_equal(host(parts[2]), data[6:])
    parts = mg.split(x, [2, 5], dim=0)
    assert [p.shape for p in parts] == [(2, 2), (5, 2)]
    assert [p.shape for p in x.chunk(3)] == [(3, 2), (3, 2), (1, 2)]
    assert [p.shape for p in x.chunk(2, dim=1)] == [(7, 1), (7, 1)]
    assert gradcheck(lambda t: t.split([2, 5])[1] * 2 + 0, (x,))
    assert gradcheck(lambda t: tuple(p * (i + 1) for i, p in enumerate(t.chunk(3))), (x,))
    x.grad = None
    a, b = x.split([3, 4])
    (a.sum() * 2 + b.sum() * 3).backward()
    np.testing.assert_array_equal(host(x.grad), np.r_[np.full((3, 2), 2.0), np.full((4, 2), 3.0)])


def test_expand_gradient_sums(device):
    x = T([[1.0], [2.0]], device)
    x.expand(2, 5).sum().backward()
    np.testing.assert_array_equal(host(x.grad), [[5.0], [5.0]])


def test_repeat_gradient_sums(device):
    x = T([1.0, 2.0], device)
    (x.repeat(3, 2) * mg.tensor(np.arange(12.0).reshape(3, 4), device=device)).sum().backward()
    w = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(host(x.grad), [w[:, 0::2].sum(), w[:, 1::2].sum()])


def test_masked_fill_values_and_gradcheck(device):
    data = rand(3, 4)
    mask_np = np.random.default_rng(1).random((3, 1)) > 0.5
    mask_np[0] = True
    x = T(data, device)
    mask = mg.tensor(mask_np, device=device)
    out = x.masked_fill(mask, -1.5)
    np.testing.assert_array_equal(host(out), np.where(mask_np, -1.5, data))
    assert gradcheck(lambda t: mg.masked_fill(t, mask, 0.0), (x,))
    y = T(data, device)
    y.masked_fill(mask, float("-inf")).exp().sum().backward()
    np.testing.assert_allclose(host(y.grad), np.where(mask_np, 0.0, np.exp(data)))
    out = x.masked_fill(mask, mg.tensor(2.0))
    np.testing.assert_array_equal(host(out), np.where(mask_np, 2.0, data))


def test_masked_fill_keeps_dtype(device):
    x = mg.tensor([1, 2, 3], device=device)
    out = x.masked_fill(mg.tensor([True, False, True], device=device), 0)
    assert out.dtype == mg.int64
    np.testing.assert_array_equal(host(out), [0, 2, 0])


# --- views share storage and the version counter ---------------------------------------------------------
@pytest.mark.parametrize("make_view", [lambda t: t.view(3, 2), lambda t: t.reshape(6), lambda t: t.transpose(0, 1),
                                       lambda t: t.permute(1, 0), lambda t: t[1:], lambda t: t[0],
                                       lambda t: t.unsqueeze(0), lambda t: t.T, lambda t: t.expand(4, 2, 3),
                                       lambda t: t[None, ..., ::2]],
                         ids=["view", "reshape", "transpose", "permute", "slice", "int", "unsqueeze", "T",
                              "expand", "basic_mix"])
def test_views_share_the_version_counter(make_view, device):
    base = mg.tensor(np.arange(6.0).reshape(2, 3), device=device)
    v = make_view(base)
    assert v._version == base._version == 0
    before = host(v).copy()
    with mg.no_grad():
        base.add_(1)
    assert v._version == 1
    np.testing.assert_array_equal(host(v), before + 1)  # the view sees the new values (same storage)


def test_writing_through_a_view_changes_the_base(device):
    base = mg.zeros(2, 3, device=device)
    v = base.view(6)
    v[0] = 5.0
    assert base[0, 0].item() == 5.0
    assert base._version == 1
    row = base[1]
    row.fill_(2.0)
    np.testing.assert_array_equal(host(base[1]), [2.0, 2.0, 2.0])


def test_reshape_of_noncontiguous_still_correct(device):
    data = rand(3, 4)
    x = T(data, device)
    out = x.T.reshape(12)
    np.testing.assert_array_equal(host(out), data.T.reshape(12))
    assert gradcheck(lambda t: t.T.reshape(2, 6) * 1, (x,))


def test_contiguous_and_clone(device):
    x = T(rand(3, 4), device)
    y = x.T.contiguous()
    np.testing.assert_array_equal(host(y), host(x).T)
    c = x.clone()
    assert c.array is not x.array and c.grad_fn is not None
    np.testing.assert_array_equal(host(c), host(x))
    assert gradcheck(lambda t: t.clone(), (x,))


def test_shape_errors(device):
    x = mg.zeros(2, 3, device=device)
    with pytest.raises(ShapeError, match=r"reshape: shape \(4, 2\).*\(2, 3\)"):
        x.reshape(4, 2)
    with pytest.raises(ShapeError, match="reshape"):
        x.reshape(-1, -1)
    with pytest.raises(ShapeError, match="expand"):
        x.expand(2, 4)
    with pytest.raises(ShapeError, match="expand"):
        x.expand(3)
    with pytest.raises(ShapeError, match="permute"):
        x.permute(0, 0)
    with pytest.raises(OpIndexError, match="transpose"):
        x.transpose(0, 2)
    with pytest.raises(OpIndexError, match="unsqueeze"):
        x.unsqueeze(4)
    with pytest.raises(OpIndexError, match="squeeze"):
        x.squeeze(-3)
    with pytest.raises(ShapeError, match="cat"):
        mg.cat([x, mg.zeros(3, 2, device=device)])
    with pytest.raises(ShapeError, match="cat"):
        mg.cat([x, mg.zeros(2, device=device)])
    with pytest.raises(ShapeError, match="stack"):
        mg.stack([x, mg.zeros(3, 2, device=device)])
    with pytest.raises(ArgumentError, match="stack"):
        mg.stack([])
    with pytest.raises(ShapeError, match="split"):
        x.split([1, 2])
    with pytest.raises(ArgumentError, match="pad"):
        mg.ops.pad(x, (1,))
    with pytest.raises(ShapeError, match="repeat"):
        x.repeat(2)
    with pytest.raises(ShapeError, match="tril"):
        mg.zeros(3, device=device).tril()
    with pytest.raises(ShapeError, match="t: "):
        mg.zeros(2, 2, 2, device=device).t()
    with pytest.raises(ArgumentError, match="flatten"):
        mg.zeros(2, 2, 2, device=device).flatten(2, 1)


# --- view(dtype): the same bytes read as another dtype ---------------------------------------------
@pytest.mark.parametrize("src, dst", [(np.float32, np.int32), (np.int64, np.float64), (np.float16, np.int16),
                                      (np.uint8, np.int8)])
def test_view_dtype_same_size_reinterprets_bits_and_keeps_shape(src, dst, device):
    data = (rand(2, 3) * 100).astype(src)
    x = mg.tensor(data, device=device)
    v = x.view(dst)
    assert v.shape == (2, 3) and v.dtype.np_dtype == np.dtype(dst)
    np.testing.assert_array_equal(host(v), data.view(dst))


@pytest.mark.parametrize("src, dst, shape", [(np.float32, np.float16, (2, 6)), (np.float32, np.uint8, (2, 12)),
                                             (np.int8, np.int32, (2, 1)), (np.float16, np.float64, (2, 1))])
def test_view_dtype_other_size_scales_the_last_dim(src, dst, shape, device):
    data = (rand(2, 3) * 10).astype(src) if np.dtype(src).itemsize >= np.dtype(dst).itemsize \
        else (rand(2, 4) * 10).astype(src)
    x = mg.tensor(data, device=device)
    v = x.view(np.dtype(dst).name)
    assert v.shape == shape
    np.testing.assert_array_equal(host(v), data.view(dst))


def test_view_dtype_shares_storage_and_version_counter(device):
    x = mg.zeros(2, 2, device=device)
    bits = x.view(mg.int32)
    with mg.no_grad():
        x.add_(1.0)
    assert bits._version == x._version == 1
    np.testing.assert_array_equal(host(bits), np.ones((2, 2), np.float32).view(np.int32))
    bits.fill_(0)                                   # writing through the view changes the base
    assert x._version == 2 and host(x).sum() == 0
    assert x.view(mg.float32) is x                  # the same dtype: the tensor itself, as reshape


def test_view_dtype_errors(device):
    with pytest.raises(ShapeError, match=r"view: .*\(2, 3\) \(int8\) as int32.*not a multiple"):
        mg.zeros(2, 3, dtype=mg.int8, device=device).view(mg.int32)
    with pytest.raises(ShapeError, match=r"view: .*\(3, 2\) \(float32\) as float16.*last dim must be contiguous"):
        mg.zeros(2, 3, device=device).T.view(mg.float16)
    with pytest.raises(ShapeError, match=r"view: .*0-d tensor"):
        mg.tensor(1.0, device=device).view(mg.float64)
    x = mg.ones(2, 2, requires_grad=True, device=device)
    with pytest.raises(mg.errors.AutogradError, match=r"view: .*requires grad as int32.*detach"):
        x.view(mg.int32)
    assert not x.detach().view(mg.int32).requires_grad
    with mg.no_grad():
        assert x.view(mg.int32).dtype == mg.int32
