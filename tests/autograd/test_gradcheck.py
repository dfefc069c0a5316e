"""gradcheck: passes correct ops, pinpoints wrong gradients, refuses low-precision inputs."""
import re

import numpy as np
import pytest

import minigrad as mg
from minigrad.autograd import Function, gradcheck
from minigrad.errors import GradcheckError


def leaf(values, dtype=mg.float64):
    return mg.tensor(values, dtype=dtype, requires_grad=True)


class WrongSquare(Function):
    """Claims d(x^2)/dx = 3x: wrong by 50% everywhere."""

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return a * a

    @staticmethod
    def backward(ctx, grad):
        a, = ctx.saved_tensors
        return grad * 3 * a


class WrongAtOneElement(Function):
    """Correct x*y gradient except for element (1, 2) of the second input."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        gb = grad * a
        gb = gb.copy()
        gb[1, 2] += 5.0
        return grad * b, gb


class ForgetsInput(Function):
    @staticmethod
    def forward(ctx, a, b):
        return a + b

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def test_correct_ops_pass():
    rng = np.random.default_rng(0)
    a, b = leaf(rng.standard_normal((3, 4))), leaf(rng.uniform(0.5, 1.5, (4,)))
    assert gradcheck(lambda x, y: (x * y).exp().sum(dim=1) / y.sum(), (a, b)) is True
    assert gradcheck(lambda x: x - x.logsumexp(-1, keepdim=True), [a])


def test_multiple_outputs_and_non_grad_inputs():
    rng = np.random.default_rng(1)
    a = leaf(rng.standard_normal((2, 3)))
    c = mg.tensor(rng.standard_normal((2, 3)), dtype=mg.float64)  # no requires_grad: not checked
    assert gradcheck(lambda x, k: (x * k, x.sum(), (x > 0)), (a, c))
    assert c.grad is None


def test_gradcheck_leaves_grad_untouched():
    a = leaf([1.0, 2.0])
    a.grad = mg.tensor([7.0, 7.0], dtype=mg.float64)
    assert gradcheck(lambda x: x * x, (a,))
    np.testing.assert_array_equal(a.grad.numpy(), [7.0, 7.0])
    np.testing.assert_array_equal(a.detach().numpy(), [1.0, 2.0])  # inputs restored after perturbation


def test_wrong_gradient_raises_with_details():
    x = leaf([[0.5, -1.0, 2.0]])
    with pytest.raises(GradcheckError) as info:
        gradcheck(WrongSquare.apply, (x,))
    msg = str(info.value)
    assert "input 0" in msg
    m = re.search(r"at index \((\d+), (\d+)\): analytic (\S+) vs numeric (\S+), relative error (\S+)", msg)
    assert m, msg
    row, col, analytic, numeric, rel = int(m[1]), int(m[2]), float(m[3]), float(m[4]), float(m[5].rstrip(","))
    assert (row, col) == (0, 2)  # |3x - 2x| is largest at x = 2
    assert rel == pytest.approx(abs(analytic - numeric) / abs(numeric), rel=1e-3)
    assert analytic == pytest.approx(1.5 * numeric, rel=1e-3)


def test_wrong_gradient_pinpoints_input_and_element():
    rng = np.random.default_rng(2)
    a, b = leaf(rng.standard_normal((3, 4))), leaf(rng.standard_normal((3, 4)))
    with pytest.raises(GradcheckError, match=r"input 1 \(shape \(3, 4\)\) at index \(1, 2\)"):
        gradcheck(WrongAtOneElement.apply, (a, b))


def test_missing_gradient_is_reported():
    a, b = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    with pytest.raises(GradcheckError, match=r"input 1 .*analytic 0 vs numeric"):
        gradcheck(ForgetsInput.apply, (a, b))


def test_raise_exception_false_returns_false():
    assert gradcheck(WrongSquare.apply, (leaf([1.0]),), raise_exception=False) is False


def test_non_float64_input_is_refused():
    x = mg.tensor([1.0, 2.0], requires_grad=True)  # float32
    with pytest.raises(GradcheckError, match=r"input 0 is float32.*float64"):
        gradcheck(lambda t: t * 2, (x,))


def test_no_input_requiring_grad_is_refused():
    with pytest.raises(GradcheckError, match="no input requires grad"):
        gradcheck(lambda t: t * 2, (mg.tensor([1.0], dtype=mg.float64),))


def test_tolerances_are_used():
    class SlightlyOff(Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, grad):
            return grad * 2.01
    x = leaf([1.0])
    with pytest.raises(GradcheckError):
        gradcheck(SlightlyOff.apply, (x,))
    assert gradcheck(SlightlyOff.apply, (x,), rtol=1e-2)


def test_single_tensor_input_without_tuple():
    assert gradcheck(lambda t: t.sin(), leaf([0.1, 0.2]))
