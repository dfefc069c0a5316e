"""index_select, scatter / scatter_, repeat_interleave, nonzero (ops/indexing.py), fill_diagonal_ (inplace.py),
unique and bincount (sort.py): values against NumPy or loops, float64 gradcheck, errors."""
import numpy as np
import pytest

import minigrad as mg
from minigrad.autograd import gradcheck
from minigrad.errors import ArgumentError, AutogradError, DTypeError, OpIndexError, ShapeError

R = np.random.default_rng(2)


def T(*shape):
    return mg.tensor(R.standard_normal(shape), dtype=mg.float64, requires_grad=True)


def test_index_select():
    x = T(4, 3)
    idx = mg.tensor([2, 0, 2])
    np.testing.assert_array_equal(mg.index_select(x, 0, idx).detach().numpy(), x.detach().numpy()[[2, 0, 2]])
    np.testing.assert_array_equal(x.index_select(-1, mg.tensor(1)).detach().numpy(), x.detach().numpy()[:, [1]])
    assert gradcheck(lambda t: t.index_select(1, mg.tensor([0, 0, 2])), [x])
    with pytest.raises(DTypeError, match="index_select: index must be an integer tensor"):
        x.index_select(0, mg.tensor([0.0]))
    with pytest.raises(OpIndexError, match="out of range"):
        x.index_select(0, mg.tensor([4]))
    with pytest.raises(ShapeError, match="0-D or 1-D"):
        x.index_select(0, mg.tensor([[0]]))


def _scatter_ref(inp, dim, index, src, reduce=None):
    out = inp.copy()
    for pos in np.ndindex(*index.shape):
        tgt = list(pos)
        tgt[dim] = index[pos]
        v = src[pos] if isinstance(src, np.ndarray) else src
        if reduce == "add":
            out[tuple(tgt)] += v
        elif reduce == "multiply":
            out[tuple(tgt)] *= v
        else:
            out[tuple(tgt)] = v
    return out


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scatter_values(dim):
    inp, src = T(3, 4), T(3, 5)                    # src larger than index: only index's region is read
    index = mg.tensor([[0, 1, 2, 3], [2, 0, 1, 1]]) if dim == 0 else mg.tensor([[3, 0], [1, 2], [0, 3]])
    if dim == 0:
        index = mg.tensor([[0, 1, 2, 0], [2, 0, 1, 1]])
    d = dim % 2
    for reduce in (None, "add"):
        ref = _scatter_ref(inp.detach().numpy(), d, index.numpy(), src.detach().numpy(), reduce)
        np.testing.assert_allclose(mg.scatter(inp, dim, index, src, reduce=reduce).detach().numpy(), ref)
    ref = _scatter_ref(inp.detach().numpy(), d, index.numpy(), 2.5)
    np.testing.assert_allclose(inp.scatter(dim, index, 2.5).detach().numpy(), ref)
    np.testing.assert_allclose(inp.scatter(dim, index, value=2.5).detach().numpy(), ref)
    with mg.no_grad():
        ref = _scatter_ref(inp.detach().numpy(), d, index.numpy(), src.detach().numpy(), "multiply")
        np.testing.assert_allclose(inp.scatter(dim, index, src, reduce="multiply").numpy(), ref)


def test_scatter_gradients():
    index = mg.tensor([[0, 1, 2], [1, 2, 0]])           # no repeats along dim 0 in a column
    assert gradcheck(lambda i, s: mg.scatter(i, 0, index, s), [T(3, 3), T(2, 4)])
    assert gradcheck(lambda i, s: mg.scatter(i, 1, mg.tensor([[0, 0, 2]]), s, reduce="add"), [T(2, 3), T(1, 3)])
    assert gradcheck(lambda i: mg.scatter(i, 0, index, 0.5), [T(3, 3)])


def test_scatter_in_place():
    z = mg.zeros(2, 4)
    assert z.scatter_(1, mg.tensor([[1], [3]]), 5.0) is z
    assert z.tolist() == [[0, 5, 0, 0], [0, 0, 0, 5]]
    o = mg.ones(2, 4).scatter_(1, mg.tensor([[1, 1], [3, 3]]), mg.full((2, 2), 2.0), reduce="add")
    assert o.tolist() == [[1, 5, 1, 1], [1, 1, 1, 5]]
    w = T(2, 3)
    y = w * 1.0
    y.scatter_(0, mg.tensor([[1, 0, 1]]), w[:1] * 3)      # tracked: differentiable through the in-place write
    y.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [[4, 3, 4], [0, 1, 0]])   # overwritten: (1,0) (0,1) (1,2)


def test_scatter_errors():
    x = mg.zeros(3, 3)
    with pytest.raises(OpIndexError, match="scatter: index out of range"):
        x.scatter(0, mg.tensor([[3]]), 1.0)
    with pytest.raises(ShapeError, match="as many dims"):
        x.scatter(0, mg.tensor([1]), 1.0)
    with pytest.raises(DTypeError, match="must have input's dtype"):
        x.scatter(0, mg.tensor([[1]]), mg.ones(1, 1, dtype=mg.float64))
    with pytest.raises(ArgumentError, match="reduce must be"):
        x.scatter(0, mg.tensor([[1]]), 1.0, reduce="max")
    with pytest.raises(ArgumentError, match="not differentiable"):
        T(2, 2).scatter(0, mg.tensor([[1]]), 2.0, reduce="multiply")
    with pytest.raises(ArgumentError, match="missing src"):
        x.scatter(0, mg.tensor([[1]]))


def test_repeat_interleave():
    x = mg.tensor([[1, 2], [3, 4]])
    assert mg.repeat_interleave(x, 2).tolist() == [1, 1, 2, 2, 3, 3, 4, 4]
    assert x.repeat_interleave(mg.tensor([1, 2]), dim=0).tolist() == [[1, 2], [3, 4], [3, 4]]
    assert x.repeat_interleave(3, dim=1).tolist() == np.repeat(x.numpy(), 3, axis=1).tolist()
    assert mg.repeat_interleave(mg.tensor([2, 3])).tolist() == [0, 0, 1, 1, 1]
    assert x.repeat_interleave(mg.tensor([2]), dim=0, output_size=4).shape == (4, 2)
    assert gradcheck(lambda t: t.repeat_interleave(mg.tensor([0, 2, 1]), dim=1), [T(2, 3)])
    with pytest.raises(ShapeError, match="repeats must have 1 or 2 elements"):
        x.repeat_interleave(mg.tensor([1, 2, 3]), dim=0)
    with pytest.raises(ArgumentError, match="non-negative"):
        x.repeat_interleave(-1)


def test_nonzero():
    x = mg.tensor([[1, 0, 2], [0, 0, 3]])
    assert mg.nonzero(x).tolist() == [[0, 0], [0, 2], [1, 2]] and mg.nonzero(x).dtype == mg.int64
    rows, cols = x.nonzero(as_tuple=True)
    assert rows.tolist() == [0, 0, 1] and cols.tolist() == [0, 2, 2]
    assert mg.nonzero(mg.zeros(2, 2)).shape == (0, 2)


def test_fill_diagonal_():
    e = mg.zeros(5, 3)
    assert e.fill_diagonal_(2.0) is e
    ref = np.zeros((5, 3))
    np.fill_diagonal(ref, 2.0)
    np.testing.assert_array_equal(e.numpy(), ref)
    ref = np.zeros((7, 3))
    np.fill_diagonal(ref, 1.0, wrap=True)
    np.testing.assert_array_equal(mg.zeros(7, 3).fill_diagonal_(1.0, wrap=True).numpy(), ref)
    cube = mg.zeros(3, 3, 3).fill_diagonal_(1)
    assert cube.sum().item() == 3 and cube[2, 2, 2].item() == 1
    assert gradcheck(lambda t: (t * 1.0).fill_diagonal_(0.5), [T(3, 4)])
    with pytest.raises(ShapeError, match="fill_diagonal_"):
        mg.zeros(2, 3, 4).fill_diagonal_(1.0)
    with pytest.raises(AutogradError, match="leaf"):
        T(2, 2).fill_diagonal_(1.0)


def test_unique():
    x = mg.tensor([3, 1, 3, 2, 1])
    assert mg.unique(x).tolist() == [1, 2, 3]
    out, inv, counts = x.unique(return_inverse=True, return_counts=True)
    assert out.tolist() == [1, 2, 3] and inv.tolist() == [2, 0, 2, 1, 0] and counts.tolist() == [2, 1, 2]
    out, inv = mg.unique(mg.tensor([[2.0, 1.0], [1.0, 2.0]]), sorted=False, return_inverse=True)
    assert out.tolist() == [1.0, 2.0] and out.dtype == mg.float32 and inv.shape == (2, 2)
    rows, inv = mg.unique(mg.tensor([[1, 2], [1, 2], [0, 5]]), dim=0, return_inverse=True)
    assert rows.tolist() == [[0, 5], [1, 2]] and inv.tolist() == [1, 1, 0]


def test_bincount():
    assert mg.bincount(mg.tensor([0, 1, 1, 4])).tolist() == [1, 2, 0, 0, 1]
    assert mg.tensor([0, 1]).bincount(minlength=4).tolist() == [1, 1, 0, 0]
    w = mg.bincount(mg.tensor([0, 1, 1]), weights=mg.tensor([0.5, 1.0, 2.0]), minlength=4)
    assert w.tolist() == [0.5, 3.0, 0, 0] and w.dtype == mg.float32
    assert mg.bincount(mg.tensor([1]), weights=mg.tensor([2])).dtype == mg.float64
    assert mg.bincount(mg.tensor([], dtype=mg.int64)).shape == (0,)
    with pytest.raises(ShapeError, match="bincount: input must be a 1-D integer tensor"):
        mg.bincount(mg.tensor([[1]]))
    with pytest.raises(ArgumentError, match="non-negative"):
        mg.bincount(mg.tensor([-1, 2]))


def test_the_idioms_on_each_device(device):
    """The new ops keep their results on the input's device (CUDA: CuPy, or its emulation in CI)."""
    x = mg.tensor(R.standard_normal((2, 3, 4, 4)), device=device, requires_grad=True)
    w = mg.tensor(R.standard_normal((3, 2, 2, 2)), device=device, requires_grad=True)
    outs = [mg.einsum("nchw,c->nhw", x, x[0, :, 0, 0]), mg.nn.functional.interpolate(x, scale_factor=2, mode="bilinear"),
            mg.nn.functional.conv_transpose2d(x, w, stride=2), x.index_select(1, mg.tensor([0, 2], device=device)),
            x.scatter(1, mg.zeros(2, 1, 4, 4, dtype=mg.int64, device=device), 1.0), mg.diag(x[0, 0]),
            x.repeat_interleave(2, dim=0), mg.atan2(x, x + 1), mg.erf(x), mg.lerp(x, x * 2, 0.5)]
    sum(o.sum() for o in outs).backward()
    assert all(o.device == x.device for o in outs) and x.grad.device == x.device and w.grad.device == x.device
    i = mg.tensor([2, 0, 2, 1], device=device)
    counted = [mg.unique(i), mg.bincount(i), mg.nonzero(i), mg.zeros(3, 3, device=device).fill_diagonal_(1.0)]
    assert all(o.device == x.device for o in counted) and counted[1].tolist() == [1, 1, 2]
