"""Misuse gives a minigrad error (from minigrad.errors) whose message names the op and the offending
shapes/dtypes; no raw NumPy exception reaches the user."""
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import minigrad as mg
from minigrad.backend import ArrayBackend
from minigrad.backend.device import Device
from minigrad.errors import (AnomalyError, ArgumentError, AutogradError, DeviceError, DTypeError, GradientError,
                             InplaceModificationError, MinigradError, OpIndexError, ShapeError)


def _fake_device():
    """A second device computing with NumPy, made by hand so no global backend registration changes."""
    dev = Device("cuda", 7)
    dev.backend = ArrayBackend(dev, np)
    return dev


def _backward_twice():
    x = mg.ones(2, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    y.backward()


def _saved_then_modified():
    x = mg.ones(2, requires_grad=True)
    y = x.exp()
    y.mul_(2)
    y.sum().backward()


class _BadGrad(mg.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        return a.sum(axis=0)

    @staticmethod
    def backward(ctx, grad):
        return grad[:1]


# (callable, error class, patterns that must all appear in the message)
CASES = {
    "matmul_misaligned": (lambda: mg.ones(3, 4) @ mg.ones(5, 6), ShapeError,
                          [r"^matmul", r"\(3, 4\)", r"\(5, 6\)", "4 != 5"]),
    "matmul_batch": (lambda: mg.ones(2, 3, 4) @ mg.ones(3, 4, 5), ShapeError, [r"^matmul", r"\(2, 3, 4\)", r"\(3, 4, 5\)"]),
    "matmul_0d": (lambda: mg.tensor(1.0) @ mg.ones(3), ShapeError, [r"^matmul", r"\(\)", r"\(3,\)"]),
    "add_unbroadcastable": (lambda: mg.ones(3, 4) + mg.ones(5, 6), ShapeError, [r"^add", r"\(3, 4\)", r"\(5, 6\)"]),
    "mul_unbroadcastable": (lambda: mg.ones(2, 3) * mg.ones(4), ShapeError, [r"^mul", r"\(2, 3\)", r"\(4,\)"]),
    "where_unbroadcastable": (lambda: mg.where(mg.ones(2) > 0, mg.ones(3), mg.ones(2)), ShapeError,
                              [r"^where", r"\(3,\)"]),
    "compare_unbroadcastable": (lambda: mg.ones(2) < mg.ones(3), ShapeError, [r"less", r"\(2,\)", r"\(3,\)"]),
    "float_tensor_index": (lambda: mg.ones(3)[mg.tensor([0.0, 1.0])], DTypeError, ["index", "float32"]),
    "float_index": (lambda: mg.ones(3)[0.5], DTypeError, ["index", "float"]),
    "requires_grad_int": (lambda: mg.tensor([1, 2], requires_grad=True), DTypeError, ["requires_grad", "int64"]),
    "requires_grad_bool": (lambda: mg.tensor([True]).requires_grad_(), DTypeError, ["requires_grad", "bool"]),
    "reshape_incompatible": (lambda: mg.ones(2, 3).reshape(4, 2), ShapeError,
                             [r"^reshape", r"\(4, 2\)", r"\(2, 3\)", "6 elements"]),
    "view_two_minus_one": (lambda: mg.ones(2, 3).view(-1, -1), ShapeError, [r"^reshape", r"\(-1, -1\)"]),
    "expand_incompatible": (lambda: mg.ones(2, 3).expand(4, 3), ShapeError, [r"^expand", r"\(2, 3\)", r"\(4, 3\)"]),
    "cat_mismatch": (lambda: mg.cat([mg.ones(2, 3), mg.ones(2, 4)], dim=0), ShapeError,
                     [r"^cat", r"\(2, 4\)", r"\(2, 3\)"]),
    "stack_mismatch": (lambda: mg.stack([mg.ones(2, 3), mg.ones(3, 2)]), ShapeError, [r"^stack", r"\(2, 3\)", r"\(3, 2\)"]),
    "gather_float_index": (lambda: mg.ones(2, 2).gather(1, mg.zeros(2, 2)), DTypeError, [r"^gather", "float32"]),
    "gather_out_of_range": (lambda: mg.ones(2, 3).gather(1, mg.tensor([[0, 3], [1, 0]])), OpIndexError,
                            [r"^gather", "out of range", "size 3"]),
    "gather_ndim": (lambda: mg.ones(2, 3).gather(1, mg.tensor([0, 1])), ShapeError, [r"^gather", r"\(2,\)", r"\(2, 3\)"]),
    "one_hot_out_of_range": (lambda: mg.one_hot(mg.tensor([0, 3]), 3), OpIndexError, [r"^one_hot", r"\[0, 3\)"]),
    "one_hot_float": (lambda: mg.one_hot(mg.tensor([0.0]), 3), DTypeError, [r"^one_hot", "float32"]),
    "squeeze_dim": (lambda: mg.ones(2, 1).squeeze(2), OpIndexError, [r"^squeeze", "dim 2", "2 dims"]),
    "unsqueeze_dim": (lambda: mg.ones(2, 1).unsqueeze(-4), OpIndexError, [r"^unsqueeze", "dim -4", "2 dims"]),
    "transpose_dim": (lambda: mg.ones(2, 3).transpose(0, 2), OpIndexError, [r"^transpose", "dim 2", "2 dims"]),
    "permute_not_perm": (lambda: mg.ones(2, 3).permute(1, 1), ShapeError, [r"^permute", r"\(2, 3\)"]),
    "sum_dim": (lambda: mg.ones(2, 3).sum(dim=2), OpIndexError, [r"^sum", "dim 2", "2 dims"]),
    "max_dim": (lambda: mg.ones(2, 3).max(dim=-3), OpIndexError, [r"^max", "dim -3"]),
    "softmax_like_logsumexp_dim": (lambda: mg.ones(3).logsumexp(1), OpIndexError, [r"^logsumexp", "dim 1"]),
    "cat_dim": (lambda: mg.cat([mg.ones(2), mg.ones(2)], dim=1), OpIndexError, [r"^cat", "dim 1"]),
    "devices_mixed": (lambda: mg.ones(2) + mg.ones(2, device=_fake_device()), DeviceError,
                      [r"^add", "different devices", "cpu", "cuda:7"]),
    "devices_mixed_matmul": (lambda: mg.ones(2, 2) @ mg.ones(2, 2, device=_fake_device()), DeviceError,
                             [r"^matmul", "cpu", "cuda:7"]),
    "devices_mixed_compare": (lambda: mg.ones(2) == mg.ones(2, device=_fake_device()), DeviceError,
                              ["equal", "cpu", "cuda:7"]),
    "backward_non_scalar": (lambda: (mg.ones(2, 3, requires_grad=True) * 2).backward(), AutogradError,
                            [r"^backward", "scalar", r"\(2, 3\)"]),
    "backward_wrong_gradient_shape": (lambda: (mg.ones(2, requires_grad=True) * 2).backward(mg.ones(3)), AutogradError,
                                      [r"^backward", r"\(3,\)", r"\(2,\)"]),
    "backward_no_grad": (lambda: mg.ones(2).sum().backward(), AutogradError, [r"^backward", "does not require grad"]),
    "backward_twice": (_backward_twice, AutogradError, [r"^mul", "second time", "retain_graph"]),
    "saved_modified": (_saved_then_modified, InplaceModificationError, [r"^exp", "in-place", "version"]),
    "inplace_leaf": (lambda: mg.ones(2, requires_grad=True).mul_(2), AutogradError, [r"^mul_", "leaf"]),
    "bad_grad_shape": (lambda: _BadGrad.apply(mg.ones(2, 3, requires_grad=True)).sum().backward(), GradientError,
                       [r"^_bad_grad", r"\(1,\)", r"\(2, 3\)"]),
    "item_multi": (lambda: mg.ones(2, 2).item(), ShapeError, [r"^item", r"\(2, 2\)"]),
    "bool_multi": (lambda: bool(mg.ones(3)), ShapeError, ["ambiguous", r"\(3,\)"]),
    "masked_fill_nonbool": (lambda: mg.ones(2).masked_fill(mg.ones(2), 0.0), DTypeError, [r"^masked_fill", "float32"]),
    "masked_fill_shape": (lambda: mg.ones(2, 3).masked_fill(mg.ones(4) > 0, 0.0), ShapeError,
                          [r"^masked_fill", r"\(4,\)", r"\(2, 3\)"]),
    "where_nonbool": (lambda: mg.where(mg.ones(2), mg.ones(2), mg.zeros(2)), DTypeError, [r"^where", "float32"]),
    "pad_odd": (lambda: mg.ops.pad(mg.ones(2, 2), (1, 2, 3)), ArgumentError, [r"^pad", r"\(1, 2, 3\)"]),
    "pad_too_long": (lambda: mg.ops.pad(mg.ones(2), (1, 1, 1, 1)), ArgumentError, [r"^pad", r"\(1, 1, 1, 1\)"]),
    "split_sections": (lambda: mg.ones(5, 2).split([2, 2]), ShapeError, [r"^split", r"\[2, 2\]", "5", r"\(5, 2\)"]),
    "getitem_out_of_range": (lambda: mg.ones(2, 3)[0, 3], OpIndexError, [r"^getitem", "3", "size 3"]),
    "getitem_too_many": (lambda: mg.ones(2)[0, 0], OpIndexError, [r"^getitem", r"\(2,\)"]),
    "getitem_list_out_of_range": (lambda: mg.ones(2)[[0, 5]], OpIndexError, [r"^getitem", "5"]),
    "mean_int": (lambda: mg.tensor([1, 2]).mean(), DTypeError, [r"^mean", "int64"]),
    "var_int": (lambda: mg.tensor([1, 2]).std(), DTypeError, [r"^var/std", "int64"]),
    "argmax_empty": (lambda: mg.ones(0, 2).argmax(0), ShapeError, [r"^argmax", r"\(0, 2\)"]),
    "split_0d": (lambda: mg.tensor(1.0).split(1), ShapeError, [r"^split", "0-d"]),
    "device_tpu": (lambda: mg.device("tpu"), DeviceError, [r"^device", "tpu"]),
    "device_bad_index": (lambda: mg.device("cuda:x"), DeviceError, [r"^device", "cuda:x"]),
    "dtype_unsupported": (lambda: mg.tensor(np.zeros(2, np.complex128)), DTypeError, ["complex128", "not supported"]),
    "dtype_unknown_name": (lambda: mg.zeros(2, dtype="quaternion"), DTypeError, ["quaternion"]),
    "logical_not_float": (lambda: ~mg.ones(2), DTypeError, [r"^logical_not", "float32"]),
    "inplace_result_dtype": (lambda: mg.tensor([1, 2]).mul_(0.5), DTypeError, [r"^mul_", "float32", "int64"]),
    "inplace_result_shape": (lambda: mg.ones(2).add_(mg.ones(3, 2)), ShapeError, [r"^add_", r"\(3, 2\)", r"\(2,\)"]),
    "setitem_shape": (lambda: mg.ones(2, 3).__setitem__(0, mg.ones(4)), ShapeError, [r"^setitem", r"\(2, 3\)"]),
    "write_into_expand": (lambda: mg.ones(3, 1).expand(3, 2).add_(1), ShapeError, [r"^add_", r"\(3, 2\)", "clone"]),
    "setitem_out_of_range": (lambda: mg.zeros(3).__setitem__(5, 1.0), OpIndexError, [r"^setitem", "5", r"\(3,\)"]),
    "copy_shape": (lambda: mg.ones(2, 3).copy_(mg.ones(4)), ShapeError, [r"^copy_", r"\(4,\)", r"\(2, 3\)"]),
    "clamp_no_bounds": (lambda: mg.ones(2).clamp(), ArgumentError, [r"^clamp"]),
    "tril_1d": (lambda: mg.ones(3).tril(), ShapeError, [r"^tril", r"\(3,\)"]),
    "repeat_too_few": (lambda: mg.ones(2, 3).repeat(2), ShapeError, [r"^repeat"]),
    "mm_3d": (lambda: mg.mm(mg.ones(2, 2, 2), mg.ones(2, 2)), ShapeError, [r"^mm", r"\(2, 2, 2\)"]),
    "randint_empty": (lambda: mg.randint(3, 3, (2,)), ArgumentError, [r"^randint", r"\[3, 3\)"]),
    "rand_int_dtype": (lambda: mg.rand(2, dtype=mg.int64), DTypeError, [r"^rand", "int64"]),
    "zeros_negative": (lambda: mg.zeros(2, -3), ArgumentError, ["negative", r"\(2, -3\)"]),
    "tensor_ragged": (lambda: mg.tensor([[1, 2], [3]]), ShapeError, [r"^tensor", "ragged"]),
    "register_hook_no_grad": (lambda: mg.ones(2).register_hook(lambda g: g), AutogradError, [r"^register_hook"]),
    "chunk_zero": (lambda: mg.ones(4).chunk(0), ArgumentError, [r"^chunk", "0"]),
    "flatten_order": (lambda: mg.ones(2, 3, 4).flatten(2, 0), ArgumentError, [r"^flatten"]),
    "prod_tuple_dim": (lambda: mg.ones(2, 2).prod(dim=(0, 1)), ArgumentError, [r"^prod"]),
}


def test_at_least_25_cases():
    assert len(CASES) >= 25


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("name", sorted(CASES))
def test_misuse_raises_clear_minigrad_error(name):
    fn, cls, patterns = CASES[name]
    with pytest.raises(MinigradError) as info:
        fn()
    err = info.value
    assert isinstance(err, cls), f"{name}: expected {cls.__name__}, got {type(err).__name__}: {err}"
    assert type(err).__module__ == "minigrad.errors"
    msg = str(err)
    for pat in patterns:
        assert re.search(pat, msg), f"{name}: {pat!r} not in message {msg!r}"


def test_error_classes_subclass_builtins():
    assert issubclass(ShapeError, ValueError) and issubclass(ArgumentError, ValueError)
    assert issubclass(DTypeError, TypeError)
    assert issubclass(DeviceError, RuntimeError) and issubclass(AutogradError, RuntimeError)
    assert issubclass(OpIndexError, IndexError)
    assert issubclass(InplaceModificationError, AutogradError) and issubclass(GradientError, AutogradError)
    assert issubclass(AnomalyError, AutogradError)
    with pytest.raises(ValueError):  # ordinary except clauses keep working
        mg.ones(2) + mg.ones(3)
    with pytest.raises(IndexError):
        mg.ones(2)[5]


def test_chained_numpy_exception_is_hidden():
    """Converted NumPy errors are raised ``from None`` so the traceback shows only minigrad's error."""
    try:
        mg.ones(3, 4) + mg.ones(5, 6)
    except MinigradError as e:
        assert e.__cause__ is None and e.__suppress_context__
    else:
        pytest.fail("no error")


# --- fuzz: whatever shapes and dims are passed, failures are minigrad errors -----------------------------
_BINARY = [mg.add, mg.sub, mg.mul, mg.div, mg.pow, mg.maximum, mg.minimum, mg.matmul, mg.lt, mg.eq,
           lambda a, b: mg.where(a > 0, a, b), lambda a, b: mg.cat([a, b], dim=-1), lambda a, b: mg.stack([a, b]),
           lambda a, b: a.masked_fill(b > 0, 1.0), lambda a, b: a.expand(*b.shape), lambda a, b: a.reshape(b.shape),
           lambda a, b: a.expand_as(b)]
_DIM_OPS = [lambda a, d: a.sum(d), lambda a, d: a.mean(d, keepdim=True), lambda a, d: a.max(d),
            lambda a, d: a.argmax(d), lambda a, d: a.var(d), lambda a, d: a.logsumexp(d), lambda a, d: a.prod(d),
            lambda a, d: a.cumsum(d), lambda a, d: a.squeeze(d), lambda a, d: a.unsqueeze(d),
            lambda a, d: a.transpose(0, d), lambda a, d: a.flatten(d), lambda a, d: a.split(2, d),
            lambda a, d: a.chunk(2, d), lambda a, d: a.amax(d),
            lambda a, d: a.gather(d, mg.zeros(*a.shape, dtype=mg.int64)), lambda a, d: a[d],
            lambda a, d: a[..., d], lambda a, d: a.narrow(d, 0, 1), lambda a, d: a.flip(d)]

shape_st = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@settings(max_examples=50, deadline=None)
@given(sa=shape_st, sb=shape_st, op=st.sampled_from(range(len(_BINARY))))
def test_fuzz_binary_misuse_never_leaks_raw_errors(sa, sb, op):
    a, b = mg.ones(*sa, dtype=mg.float64), mg.ones(*sb, dtype=mg.float64)
    try:
        out = _BINARY[op](a, b)
    except MinigradError:
        return
    assert isinstance(out, (mg.Tensor, tuple))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@settings(max_examples=50, deadline=None)
@given(shape=shape_st, dim=st.integers(-4, 4), op=st.sampled_from(range(len(_DIM_OPS))))
def test_fuzz_dim_misuse_never_leaks_raw_errors(shape, dim, op):
    a = mg.ones(*shape, dtype=mg.float64)
    try:
        out = _DIM_OPS[op](a, dim)
    except MinigradError:
        return
    assert isinstance(out, (mg.Tensor, tuple))
