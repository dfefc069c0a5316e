"""Comparisons, logic and other ops without a gradient: results are new tensors outside the graph.

They compute on the arrays directly (no Function: nothing to record) and wrap the result like any op's
(``_args.wrap``). ``floor_divide`` and ``remainder`` are computed the same way: minigrad does not
differentiate them.
"""
from ..autograd.extensions import outside_apply
from ..errors import ArgumentError, DTypeError, ShapeError
from ..tensor_base import TensorBase as Tensor  # every Tensor is one (tensor.py imports ops)
from ._args import norm_dims, operand_data, wrap


def _binary(np_name):
    """The function ``a <op> b`` computed by the array module's ``np_name`` (named so in messages)."""
    def fn(a, b):
        if not isinstance(a, Tensor):
            raise ArgumentError(f"{np_name}: first argument must be a Tensor")
        bd = operand_data(b, a, np_name)
        try:
            res = getattr(a.device.xp, np_name)(a.array, bd)
        except ValueError as e:
            raise ShapeError(f"{np_name}: {e} (shapes {tuple(a.shape)}, {tuple(getattr(bd, 'shape', ()))})") \
                from None
        except TypeError as e:
            raise DTypeError(f"{np_name}: {e} (dtypes {a.dtype}, {getattr(b, 'dtype', type(b).__name__)})") \
                from None
        return wrap(res, a.device)
    fn.__name__ = fn.__qualname__ = np_name
    return outside_apply(fn)


lt = less = _binary("less")
le = less_equal = _binary("less_equal")
gt = greater = _binary("greater")
ge = greater_equal = _binary("greater_equal")
eq = equal_elementwise = _binary("equal")
ne = not_equal = _binary("not_equal")
logical_and = _binary("logical_and")
logical_or = _binary("logical_or")
logical_xor = _binary("logical_xor")
floor_divide = _binary("floor_divide")
remainder = _binary("remainder")


@outside_apply
def logical_not(a):
    if a.array.dtype.kind != "b":
        raise DTypeError(f"logical_not (~): expected a bool tensor, got {a.dtype}")
    return wrap(~a.array, a.device)


@outside_apply
def isnan(a):
    return wrap(a.device.xp.isnan(a.array), a.device)


@outside_apply
def isinf(a):
    return wrap(a.device.xp.isinf(a.array), a.device)


@outside_apply
def isfinite(a):
    return wrap(a.device.xp.isfinite(a.array), a.device)


@outside_apply
def sign(a):
    return wrap(a.array.copy() if a.array.dtype.kind == "b" else a.device.xp.sign(a.array), a.device)


@outside_apply
def all(a, dim=None, keepdim=False):
    return wrap(a.device.xp.all(a.array, axis=norm_dims(dim, a.ndim, "all"), keepdims=keepdim), a.device)


@outside_apply
def any(a, dim=None, keepdim=False):
    return wrap(a.device.xp.any(a.array, axis=norm_dims(dim, a.ndim, "any"), keepdims=keepdim), a.device)


def equal(a, b):
    """True when both tensors have the same shape and values (PyTorch's torch.equal)."""
    return tuple(a.shape) == tuple(b.shape) and bool((a.array == b.array).all())


def allclose(a, b, rtol=1e-5, atol=1e-8, equal_nan=False):
    """True when every element is close: |a - b| <= atol + rtol * |b| (PyTorch's torch.allclose)."""
    return bool(isclose(a, b, rtol, atol, equal_nan).array.all())


@outside_apply
def isclose(a, b, rtol=1e-5, atol=1e-8, equal_nan=False):
    """Elementwise |a - b| <= atol + rtol * |b| as a bool tensor (broadcasting; NaNs equal with equal_nan)."""
    if not isinstance(a, Tensor):
        raise ArgumentError(f"isclose: first argument must be a Tensor, got {type(a).__name__}")
    if isinstance(b, Tensor) and (a.array.dtype.kind == "b") != (b.array.dtype.kind == "b"):
        raise DTypeError(f"isclose: {a.dtype} and {b.dtype} tensors can't be compared (both bool or neither)")
    if rtol < 0 or atol < 0:
        raise ArgumentError(f"isclose: rtol and atol must be non-negative, got rtol={rtol}, atol={atol}")
    bd = operand_data(b, a, "isclose")
    try:
        return wrap(a.device.xp.isclose(a.array, bd, rtol=rtol, atol=atol, equal_nan=equal_nan), a.device)
    except ValueError as e:
        raise ShapeError(f"isclose: {e} (shapes {tuple(a.shape)}, {tuple(getattr(bd, 'shape', ()))})") from None


class CompareMethods:
    """Tensor's comparisons, logical operators and tests (no gradient): a mixin of ``Tensor``."""
    __slots__ = ()
    __lt__, __le__, __gt__, __ge__, __eq__, __ne__ = lt, le, gt, ge, eq, ne
    __floordiv__, __mod__ = floor_divide, remainder
    __invert__, __and__, __or__, __xor__ = logical_not, logical_and, logical_or, logical_xor
    lt, le, gt, ge, eq, ne = lt, le, gt, ge, eq, ne
    logical_not, logical_and, logical_or = logical_not, logical_and, logical_or
    isnan, isinf, isfinite, sign, all, any = isnan, isinf, isfinite, sign, all, any
    isclose, allclose = isclose, allclose
