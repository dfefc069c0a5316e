"""einsum (every form: explicit, implicit, ellipsis, repeated indices, the list form) and the products composed
from matmul and indexing: diag, diagonal, outer/ger, addmm, baddbmm. Values against NumPy, float64 gradcheck."""
import numpy as np
import pytest

import minigrad as mg
from minigrad.autograd import gradcheck
from minigrad.errors import ArgumentError, ShapeError

R = np.random.default_rng(0)


def T(*shape):
    return mg.tensor(R.standard_normal(shape), dtype=mg.float64, requires_grad=True)


EINSUM = [("ij,jk->ik", [(2, 3), (3, 4)]), ("ij,jk", [(2, 3), (3, 4)]), ("ii->i", [(3, 3)]), ("ii", [(3, 3)]),
          ("ij->", [(2, 3)]), ("ij->j", [(2, 3)]), ("ij->ji", [(2, 3)]), ("i,j->ij", [(3,), (4,)]),
          ("bij,bjk->bik", [(2, 2, 3), (2, 3, 4)]), ("...ij,...jk->...ik", [(2, 2, 3), (2, 3, 4)]),
          ("...i,...i", [(5, 3), (3,)]), ("...ij->...ji", [(4, 2, 3)]), ("iij->j", [(2, 2, 3)]),
          ("ij,ij,ij->i", [(2, 3), (2, 3), (2, 3)]), ("i,i->", [(1,), (4,)]), ("b i j, b j -> b i", [(2, 3, 4), (2, 4)]),
          ("Ab,bC->AC", [(2, 3), (3, 2)])]


@pytest.mark.parametrize("eq, shapes", EINSUM, ids=[e for e, _ in EINSUM])
def test_einsum_values_and_gradients(eq, shapes):
    ts = [T(*s) for s in shapes]
    ref = np.einsum(eq.replace(" ", ""), *[t.detach().numpy() for t in ts])
    np.testing.assert_allclose(mg.einsum(eq, *ts).detach().numpy(), ref, rtol=1e-12, atol=1e-12)
    assert gradcheck(lambda *a: mg.einsum(eq, *a), ts)


def test_einsum_list_form_and_float32():
    a, b = mg.randn(2, 3), mg.randn(3, 4)
    out = mg.einsum("ij,jk", [a, b])
    assert out.dtype == mg.float32 and out.shape == (2, 4)
    np.testing.assert_allclose(out.numpy(), a.numpy() @ b.numpy(), rtol=1e-5)


def test_einsum_trace_gradient_is_the_identity():
    a = T(3, 3)
    mg.einsum("ii", a).backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.eye(3))


def test_einsum_errors():
    a = mg.randn(2, 3)
    with pytest.raises(ArgumentError, match="names 2 operands, got 1"):
        mg.einsum("ij,jk", a)
    with pytest.raises(ShapeError, match="operand 0 has 2 dims"):
        mg.einsum("ijk->i", a)
    with pytest.raises(ShapeError, match="subscript 'j' has sizes 3 and 4"):
        mg.einsum("ij,jk", a, mg.randn(4, 2))
    with pytest.raises(ArgumentError, match="output subscripts"):
        mg.einsum("ij->iz", a)
    with pytest.raises(ArgumentError, match="invalid subscripts"):
        mg.einsum("i1->i", a)
    with pytest.raises(ArgumentError, match="tensor operands"):
        mg.einsum("ij", a.numpy())


@pytest.mark.parametrize("k", [-2, -1, 0, 1, 2])
@pytest.mark.parametrize("shape", [(4,), (3, 4), (4, 3)])
def test_diag_both_ways(shape, k):
    x = T(*shape)
    np.testing.assert_array_equal(mg.diag(x, k).detach().numpy(), np.diag(x.detach().numpy(), k))
    np.testing.assert_array_equal(x.diag(k).detach().numpy(), np.diag(x.detach().numpy(), k))
    assert gradcheck(lambda a: mg.diag(a, k), [x])


def test_diagonal_offset_and_dims():
    y = T(2, 3, 4)
    for args in [(0, 0, 1), (1, 1, 2), (-1, 2, 0), (2, -1, -2)]:
        np.testing.assert_array_equal(mg.diagonal(y, *args).detach().numpy(), np.diagonal(y.detach().numpy(), *args))
    assert y.diagonal(offset=1, dim1=1, dim2=2).shape == (2, 3)
    assert gradcheck(lambda a: a.diagonal(1, 2, 0), [y])
    with pytest.raises(ArgumentError, match="same dim"):
        mg.diagonal(y, 0, 1, 1)
    with pytest.raises(ShapeError, match="diag: expected a 1-D or 2-D"):
        mg.diag(y)


def test_trace():
    x = T(3, 4)
    assert mg.trace(x).item() == pytest.approx(np.trace(x.detach().numpy())) and x.trace().shape == ()
    assert gradcheck(mg.trace, [x])
    with pytest.raises(ShapeError, match="trace: expected a 2-D"):
        mg.trace(T(3))


def test_outer_addmm_baddbmm():
    a, b = T(3), T(4)
    np.testing.assert_allclose(mg.outer(a, b).detach().numpy(), np.outer(a.detach().numpy(), b.detach().numpy()))
    assert mg.ger is mg.outer and a.outer(b).shape == (3, 4)
    assert gradcheck(mg.outer, [a, b])
    with pytest.raises(ShapeError, match="outer: expected two 1-D"):
        mg.outer(T(2, 2), b)
    inp, m1, m2 = T(2, 4), T(2, 3), T(3, 4)
    ref = 0.5 * inp.detach().numpy() + 2 * m1.detach().numpy() @ m2.detach().numpy()
    np.testing.assert_allclose(mg.addmm(inp, m1, m2, beta=0.5, alpha=2).detach().numpy(), ref, rtol=1e-12)
    assert gradcheck(lambda i, x, y: mg.addmm(i, x, y, beta=0.5, alpha=2), [inp, m1, m2])
    nan = mg.full((2, 4), float("nan"), dtype=mg.float64)
    assert not np.isnan(mg.addmm(nan, m1, m2, beta=0).detach().numpy()).any()     # beta=0 ignores input
    bi, b1, b2 = T(4), T(2, 2, 3), T(2, 3, 4)       # input broadcasts, as in PyTorch
    ref = 0.3 * bi.detach().numpy() + 1.5 * np.matmul(b1.detach().numpy(), b2.detach().numpy())
    np.testing.assert_allclose(bi.baddbmm(b1, b2, beta=0.3, alpha=1.5).detach().numpy(), ref, rtol=1e-12)
    assert gradcheck(lambda i, x, y: mg.baddbmm(i, x, y, beta=0.3, alpha=1.5), [bi, b1, b2])
    with pytest.raises(ShapeError, match="bmm: expected 3-D"):
        mg.baddbmm(bi, m1, m2)
