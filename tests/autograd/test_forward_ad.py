"""minigrad.autograd.forward_ad: PyTorch's names and semantics (per-op JVPs are in tests/ops/test_higher_order_ops.py)."""
import threading

import numpy as np
import pytest

import minigrad as mg
import minigrad.autograd.forward_ad as fwAD
import minigrad.nn.functional as F
from minigrad.autograd.forward_ad import ForwardADError
from minigrad.autograd.function import Function


def t64(values, grad=False):
    return mg.tensor(np.asarray(values, dtype=np.float64), dtype=mg.float64, requires_grad=grad)


def test_make_dual_unpack_dual_and_the_namedtuple():
    x, t = t64([1.0, 2.0]), t64([1.0, 0.0])
    with fwAD.dual_level() as level:
        assert isinstance(level, int)
        d = fwAD.make_dual(x, t)
        y = (d * d).sin()
        out = fwAD.unpack_dual(y)
        assert type(out).__name__ == "UnpackedDualTensor" and out._fields == ("primal", "tangent")
        primal, tangent = out
        np.testing.assert_allclose(primal.numpy(), np.sin([1.0, 4.0]))
        np.testing.assert_allclose(tangent.numpy(), [2 * np.cos(1.0), 0.0])
        assert fwAD.unpack_dual(primal).tangent is None        # the primal carries no tangent
        assert fwAD.unpack_dual(x).tangent is None             # the original is untouched
    assert fwAD.unpack_dual(y).tangent is None                 # leaving the level drops tangents


def test_errors():
    x = t64([1.0, 2.0])
    with pytest.raises(ForwardADError, match="no forward AD level"):
        fwAD.make_dual(x, x)
    with fwAD.dual_level():
        with pytest.raises(ForwardADError, match="tangent of shape"):
            fwAD.make_dual(x, t64([1.0]))
        with pytest.raises(ForwardADError, match="floating point"):
            fwAD.make_dual(mg.tensor([1, 2]), mg.tensor([1, 2]))
        with pytest.raises(ForwardADError, match="nested"):
            with fwAD.dual_level():
                pass


def test_an_op_without_a_jvp_rule_names_itself():
    class Cube(Function):
        @staticmethod
        def forward(ctx, a):
            return a ** 3

        @staticmethod
        def backward(ctx, grad):
            raise AssertionError("unused")

    with fwAD.dual_level():
        d = fwAD.make_dual(t64([1.0]), t64([1.0]))
        with pytest.raises(ForwardADError, match="cube: this op has no forward-mode rule"):
            Cube.apply(d)
        np.testing.assert_allclose(Cube.apply(t64([2.0])).numpy(), [8.0])   # no tangent: runs as usual


def test_tangents_of_inputs_without_one_are_zero_and_in_place_ops_keep_tangents():
    x, w = t64([1.0, 2.0]), t64([3.0, 4.0])
    with fwAD.dual_level():
        d = fwAD.make_dual(x, t64([1.0, 1.0]))
        y = d * w + w
        np.testing.assert_allclose(fwAD.unpack_dual(y).tangent.numpy(), [3.0, 4.0])
        z = d.clone()
        z.mul_(w)
        z[0] = 5.0
        np.testing.assert_allclose(fwAD.unpack_dual(z).tangent.numpy(), [0.0, 4.0])
        z.fill_(1.0)                                       # a constant: no tangent any more
        assert fwAD.unpack_dual(z).tangent is None


def test_forward_over_reverse_hessian_vector_product():
    x = t64([0.5, -1.0, 2.0], grad=True)
    v = t64([1.0, 2.0, -1.0])
    f = lambda x: (x.exp() * x.sin()).sum() + (x @ x) ** 2  # noqa: E731
    with fwAD.dual_level():
        d = fwAD.make_dual(x, v)
        g, = mg.autograd.grad(f(d), d, create_graph=True)
        hvp = fwAD.unpack_dual(g).tangent
    g2, = mg.autograd.grad(f(x), x, create_graph=True)
    ref, = mg.autograd.grad((g2 * v).sum(), x)
    np.testing.assert_allclose(hvp.detach().numpy(), ref.numpy(), rtol=1e-12)


def test_reverse_over_forward():
    x = t64([0.3, 0.7], grad=True)
    with fwAD.dual_level():
        jvp = fwAD.unpack_dual(F.tanh(fwAD.make_dual(x, t64([1.0, 1.0]))) * 2.0).tangent
    g, = mg.autograd.grad(jvp.sum(), x)                    # d/dx 2 tanh'(x) = -4 tanh sech^2
    th = np.tanh([0.3, 0.7])
    np.testing.assert_allclose(g.numpy(), -4 * th * (1 - th ** 2), rtol=1e-12)


def test_a_level_belongs_to_its_thread():
    seen = []
    with fwAD.dual_level():
        d = fwAD.make_dual(t64([1.0]), t64([1.0]))

        def other():
            seen.append(fwAD.unpack_dual(d * 2.0).tangent)
        th = threading.Thread(target=other)
        th.start()
        th.join()
        assert fwAD.unpack_dual(d * 2.0).tangent is not None
    assert seen == [None]


def test_forward_mode_through_a_model():
    mg.manual_seed(0)
    model = mg.nn.Sequential(mg.nn.Conv2d(1, 2, 3, padding=1), mg.nn.ReLU(), mg.nn.MaxPool2d(2),
                             mg.nn.Flatten(), mg.nn.Linear(8, 3)).double()
    x, t = t64(np.random.rand(2, 1, 4, 4)), t64(np.random.rand(2, 1, 4, 4))
    with fwAD.dual_level():
        jvp = fwAD.unpack_dual(F.log_softmax(model(fwAD.make_dual(x, t)), -1)).tangent
    with mg.no_grad():
        eps = 1e-6
        fd = (F.log_softmax(model(x + t * eps), -1) - F.log_softmax(model(x - t * eps), -1)) / (2 * eps)
    np.testing.assert_allclose(jvp.detach().numpy(), fd.numpy(), rtol=1e-5, atol=1e-8)
