"""Misuse of mg.nn.functional: each raises a minigrad error class whose message names the op."""
import numpy as np
import pytest

import minigrad as mg
import minigrad.nn.functional as F
from minigrad.errors import ArgumentError, DTypeError, MinigradError, OpIndexError, ShapeError


def test_cross_entropy_target_out_of_range():
    with pytest.raises(OpIndexError, match=r"cross_entropy: target 5 is out of bounds for 5 classes") as e:
        F.cross_entropy(mg.randn(3, 5), mg.tensor([0, 5, 1]))
    assert isinstance(e.value, IndexError)  # still an ordinary IndexError
    with pytest.raises(OpIndexError, match=r"cross_entropy: target -3 is out of bounds"):
        F.cross_entropy(mg.randn(3, 5), mg.tensor([0, -3, 1]))
    with pytest.raises(OpIndexError, match=r"nll_loss: target 9 is out of bounds for 4 classes"):
        F.nll_loss(mg.randn(2, 4, 3), mg.tensor([[0, 1, 9], [0, 0, 0]]))


def test_cross_entropy_ignored_targets_are_not_range_checked():
    loss = F.cross_entropy(mg.randn(3, 5), mg.tensor([0, -100, 1]))
    assert np.isfinite(loss.item())


def test_cross_entropy_float_targets_of_class_shape():
    with pytest.raises(DTypeError, match=r"cross_entropy: expected integer class indices .*float32 of shape \(3,\)"):
        F.cross_entropy(mg.randn(3, 5), mg.tensor([0.0, 1.0, 2.0]))
    with pytest.raises(DTypeError, match="nll_loss: expected integer class indices"):
        F.nll_loss(mg.randn(3, 5), mg.tensor([0.0, 1.0, 2.0]))


def test_cross_entropy_shape_mismatch():
    with pytest.raises(ShapeError, match=r"cross_entropy: target shape \(4,\) does not match input shape \(3, 5\)"):
        F.cross_entropy(mg.randn(3, 5), mg.tensor([0, 1, 2, 3]))
    with pytest.raises(ShapeError, match=r"cross_entropy: target shape \(2, 3\) .*expected target shape \(2, 4\)"):
        F.cross_entropy(mg.randn(2, 5, 4), mg.zeros(2, 3, dtype=mg.int64))
    with pytest.raises(ShapeError, match=r"cross_entropy: weight must have shape \(5,\)"):
        F.cross_entropy(mg.randn(3, 5), mg.tensor([0, 1, 2]), weight=mg.ones(4))


@pytest.mark.parametrize("fn", [
    lambda r: F.cross_entropy(mg.randn(2, 3), mg.tensor([0, 1]), reduction=r),
    lambda r: F.nll_loss(mg.randn(2, 3), mg.tensor([0, 1]), reduction=r),
    lambda r: F.mse_loss(mg.randn(2), mg.randn(2), reduction=r),
    lambda r: F.binary_cross_entropy_with_logits(mg.randn(2), mg.rand(2), reduction=r),
])
def test_unknown_reduction(fn):
    with pytest.raises(ArgumentError, match=r"(cross_entropy|nll_loss|mse_loss|binary_cross_entropy_with_logits)"
                                            r": unknown reduction 'avg'"):
        fn("avg")


def test_label_smoothing_out_of_range():
    with pytest.raises(ArgumentError, match="cross_entropy: label_smoothing"):
        F.cross_entropy(mg.randn(2, 3), mg.tensor([0, 1]), label_smoothing=1.5)


def test_bce_shape_and_dtype_mismatch():
    with pytest.raises(ShapeError, match=r"binary_cross_entropy_with_logits: target size \(3,\) must be the same"):
        F.binary_cross_entropy_with_logits(mg.randn(2), mg.rand(3))
    with pytest.raises(DTypeError, match="binary_cross_entropy_with_logits: target dtype"):
        F.binary_cross_entropy_with_logits(mg.randn(2), mg.rand(2, dtype=mg.float64))


def test_mse_unbroadcastable():
    with pytest.raises(ShapeError, match=r"mse_loss: input shape \(2, 3\) and target shape \(4,\)"):
        F.mse_loss(mg.randn(2, 3), mg.randn(4))


def test_conv2d_wrong_channels_named():
    with pytest.raises(ShapeError, match=r"conv2d: input has 3 channels but weight expects 4"):
        F.conv2d(mg.randn(2, 3, 8, 8), mg.randn(8, 4, 3, 3))


def test_conv_dtype_mismatch():
    with pytest.raises(DTypeError, match="conv2d: input"):
        F.conv2d(mg.randn(1, 1, 4, 4, dtype=mg.float64), mg.randn(1, 1, 3, 3))


def test_conv_bad_input_rank():
    with pytest.raises(ShapeError, match="conv2d: expected a 4-D"):
        F.conv2d(mg.randn(4, 4), mg.randn(1, 1, 3, 3))


def test_layer_norm_mismatch_named():
    with pytest.raises(ShapeError, match="layer_norm: normalized_shape"):
        F.layer_norm(mg.randn(2, 3, 4), (3,))


def test_dropout_p_outside_unit_interval():
    with pytest.raises(ArgumentError, match=r"dropout: dropout probability has to be between 0 and 1, but got 1.2"):
        F.dropout(mg.randn(2), p=1.2)


def test_embedding_out_of_range_named():
    with pytest.raises(OpIndexError, match="embedding: index 10 is out of range for 4 embeddings"):
        F.embedding(mg.tensor([[1, 10]]), mg.randn(4, 2))


def test_softmax_bad_dim():
    with pytest.raises(OpIndexError, match=r"log_softmax: dim -3 is out of range"):
        F.log_softmax(mg.randn(2, 3), dim=-3)


def test_linear_weight_not_2d():
    with pytest.raises(ShapeError, match="linear: weight must be 2-D"):
        F.linear(mg.randn(2, 3), mg.randn(3))


def test_batch_norm_momentum_not_float():
    with pytest.raises(ArgumentError, match="batch_norm: momentum"):
        F.batch_norm(mg.randn(4, 2), mg.zeros(2), mg.ones(2), training=True, momentum=None)


def test_errors_are_minigrad_errors_not_raw_numpy():
    bad_calls = [
        lambda: F.conv1d(mg.randn(1, 2, 5), mg.randn(3, 1, 2)),
        lambda: F.max_pool2d(mg.randn(1, 1, 1, 1), 2),
        lambda: F.linear(mg.randn(3), mg.randn(2, 4)),
        lambda: F.scaled_dot_product_attention(mg.randn(2, 3, 4), mg.randn(3, 5, 4), mg.randn(3, 5, 4)),
    ]
    for call in bad_calls:
        with pytest.raises(MinigradError):
            call()


# --- autograd interplay ---------------------------------------------------------------------------
def test_inplace_change_of_saved_input_is_reported_with_op_name():
    from minigrad.errors import InplaceModificationError
    # conv2d saves its im2col columns (a copy), not x: changing x afterwards is harmless, and the weight
    # gradient still uses the values the forward pass saw
    x = mg.randn(1, 2, 5, 5, dtype=mg.float64)
    w = mg.randn(3, 2, 3, 3, dtype=mg.float64, requires_grad=True)
    x0 = x.numpy().copy()
    F.conv2d(x, w).sum().backward()
    expected = w.grad.numpy().copy()
    w.grad = None
    y = F.conv2d(x, w)
    x.add_(1.0)
    y.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), expected)
    assert not np.allclose(x.numpy(), x0)
    a = mg.randn(4, 3)
    w2 = mg.randn(2, 3, requires_grad=True)
    out = F.linear(a, w2)
    a.mul_(2.0)
    with pytest.raises(InplaceModificationError, match="linear"):
        out.sum().backward()


def test_second_backward_without_retain_graph_is_an_error():
    from minigrad.errors import AutogradError
    x = mg.randn(1, 1, 4, 4, requires_grad=True)
    y = F.max_pool2d(x, 2).sum()
    y.backward()
    with pytest.raises(AutogradError, match="max_pool2d"):
        y.backward()


def test_saved_tensor_hooks_never_see_none():
    from minigrad.autograd.function import saved_tensors_hooks
    seen = []

    def pack(a):
        assert a is not None
        seen.append(a.shape)
        return a

    x = mg.randn(3, 4, requires_grad=True)
    with saved_tensors_hooks(pack, lambda a: a):
        loss = (F.layer_norm(x, 4).sum() + F.batch_norm(x, None, None, training=True).sum()
                + F.cross_entropy(x, mg.tensor([0, 1, 3]))
                + F.binary_cross_entropy_with_logits(x, mg.rand(3, 4)))
    loss.backward()
    assert seen and x.grad is not None and np.all(np.isfinite(x.grad.numpy()))
