"""The Tensor surface PyTorch programs use beyond the op library: ``view_as``, the ``new_*`` factories,
``nelement``, ``.data`` as a detached tensor, ``Size``, ``format()`` and PyTorch's printed form."""
import pickle

import numpy as np
import pytest

import minigrad as mg


def test_view_as_takes_the_other_tensors_shape_and_shares_storage():
    x = mg.arange(6.0, requires_grad=True)
    other = mg.zeros(2, 3)
    v = x.view_as(other)
    assert v.shape == (2, 3)
    (v * mg.tensor([[1.0, 2, 3], [4, 5, 6]])).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1, 2, 3, 4, 5, 6])
    with pytest.raises(ValueError, match="invalid for a tensor of shape"):
        x.view_as(mg.zeros(4))


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_new_factories_keep_dtype_and_device_unless_told(device):
    if device == "cuda" and not mg.cuda.is_available():
        pytest.skip("no CUDA device (set MINIGRAD_EMULATE_CUDA=1 for the emulator)")
    w = mg.ones(2, dtype=mg.float64, device=device)
    z = w.new_zeros(3, 4)
    assert z.shape == (3, 4) and z.dtype == mg.float64 and z.device == w.device and not z.requires_grad
    assert float(z.sum()) == 0
    o = w.new_ones((2, 2), dtype=mg.int64)
    assert o.dtype == mg.int64 and o.tolist() == [[1, 1], [1, 1]]
    f = w.new_full([2], 7.5, requires_grad=True)
    assert f.tolist() == [7.5, 7.5] and f.requires_grad and f.dtype == mg.float64
    assert w.new_empty(5).shape == (5,) and w.new_empty(0, 2).numel() == 0
    t = w.new_tensor([[1, 2]])          # data's values, self's dtype and device (PyTorch's rule)
    assert t.dtype == mg.float64 and t.device == w.device and t.tolist() == [[1.0, 2.0]]
    assert w.new_tensor([1, 2], dtype=mg.int32).dtype == mg.int32


def test_nelement_is_numel():
    assert mg.zeros(3, 4, 5).nelement() == 60 == mg.zeros(3, 4, 5).numel() and mg.tensor(1.0).nelement() == 1


def test_data_is_a_detached_tensor_on_the_same_storage():
    p = mg.ones(3, requires_grad=True)
    d = p.data
    assert isinstance(d, mg.Tensor) and not d.requires_grad and d.grad_fn is None
    d.add_(mg.tensor([1.0, 2, 3]), alpha=-1)              # the update of an SGD step written by hand
    np.testing.assert_array_equal(p.detach().numpy(), [0, -1, -2])
    values, idx = mg.max(mg.tensor([[1.0, 5, 2]]).data, 1)  # torch.max(out.data, 1)
    assert idx.tolist() == [1] and values.tolist() == [5.0]
    p.data = mg.zeros(3)
    assert p.requires_grad and p.tolist() == [0, 0, 0]
    assert isinstance(p.array, np.ndarray)
    with pytest.raises(TypeError, match=r"\.array"):
        p.data = np.zeros(3)


def test_size_is_a_tuple_with_numel_and_pytorchs_repr():
    x = mg.zeros(2, 3, 4)
    s = x.shape
    assert isinstance(s, mg.Size) and isinstance(s, tuple) and x.size() == s == (2, 3, 4)
    assert s.numel() == 24 and mg.Size([]).numel() == 1 and x.size(1) == 3 and x.size(-1) == 4
    assert repr(s) == "minigrad.Size([2, 3, 4])" and str(mg.Size([5])) == "minigrad.Size([5])"
    assert isinstance(s[1:], mg.Size) and s[1:] == (3, 4) and type(s[0]) is int
    assert isinstance(s + (5,), mg.Size) and (1,) + s == (1, 2, 3, 4) and isinstance((1,) + s, mg.Size)
    assert pickle.loads(pickle.dumps(s)) == s and mg.zeros(s).shape == s and mg.zeros(*s).shape == s
    a, b, c = s
    assert (a, b, c) == (2, 3, 4) and x.view(s[0], -1).shape == mg.Size([2, 12])


def test_format_of_a_0d_tensor_formats_its_value_as_pytorch():
    loss = mg.tensor(1.5)
    assert f"{loss:.4f}" == "1.5000" and f"{mg.tensor(3):>3d}" == "  3" and f"{loss}" == "1.5"
    assert f"{mg.ones(2)}" == str(mg.ones(2)) == "tensor([1., 1.])"
    with pytest.raises(TypeError, match="format"):
        f"{mg.ones(1):.4f}"             # PyTorch too: only 0-d tensors take a format spec


@pytest.mark.parametrize("value, printed", [
    (12.0, "tensor(12.)"),
    ([1.0, 2.5], "tensor([1.0000, 2.5000])"),
    ([1e-5, 1.0], "tensor([1.0000e-05, 1.0000e+00])"),
    ([1.0, 2.0, float("inf"), float("nan")], "tensor([ 1.,  2., inf, nan])"),
    ([[0, 1, 2], [3, 4, 5]], "tensor([[0, 1, 2],\n        [3, 4, 5]])"),
    ([True, False], "tensor([ True, False])"),
    ([], "tensor([])"),
])
def test_repr_prints_as_pytorch_does(value, printed):
    assert repr(mg.tensor(value)) == printed


def test_repr_extras_dtype_grad_and_summarised_large_tensors():
    assert repr(mg.tensor([1.5, 2], dtype=mg.float64)) == "tensor([1.5000, 2.0000], dtype=minigrad.float64)"
    assert repr(mg.ones(2, requires_grad=True)) == "tensor([1., 1.], requires_grad=True)"
    assert repr(mg.zeros(0, 3)) == "tensor([], size=(0, 3))"
    assert repr(mg.arange(1000.0, 3000.0)) == "tensor([1000., 1001., 1002.,  ..., 2997., 2998., 2999.])"
    assert repr(mg.arange(2000.0)).startswith("tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03")


def test_sort_argsort_topk_roll_as_methods():
    x = mg.tensor([3.0, 1.0, 2.0])
    assert x.topk(2).values.tolist() == [3.0, 2.0] and x.topk(1, largest=False).indices.tolist() == [1]
    assert x.sort().values.tolist() == [1.0, 2.0, 3.0] and x.argsort(descending=True).tolist() == [0, 2, 1]
    assert x.roll(1).tolist() == [2.0, 3.0, 1.0]
