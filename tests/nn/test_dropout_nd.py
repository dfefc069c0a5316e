"""Dropout1d/2d/3d: whole channels dropped, the rest scaled; PyTorch's shape rules and warnings."""
import numpy as np
import pytest

import minigrad as mg
import minigrad.nn.functional as F
from minigrad import nn
from minigrad.errors import ShapeError


@pytest.mark.parametrize("fn,shape", [(F.dropout1d, (8, 6, 5)), (F.dropout2d, (8, 6, 4, 3)),
                                      (F.dropout3d, (8, 6, 2, 3, 2))])
def test_whole_channels_are_zeroed_and_the_rest_scaled(fn, shape, device):
    mg.manual_seed(0)
    x = mg.ones(*shape, device=device, requires_grad=True)
    y = fn(x, p=0.5, training=True)
    per_channel = y.detach().numpy().reshape(shape[0], shape[1], -1)
    assert set(np.unique(per_channel)) <= {0.0, 2.0}
    assert np.all(per_channel.min(axis=-1) == per_channel.max(axis=-1))      # a channel is all-or-nothing
    assert 0.2 < (per_channel[..., 0] == 0).mean() < 0.8
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), y.detach().numpy())        # d/dx = the mask
    assert fn(x, p=0.5, training=False) is x


def test_unbatched_inputs_and_pytorchs_shape_rules():
    mg.manual_seed(1)
    y = F.dropout1d(mg.ones(6, 5), 0.5)                                       # (C, L): per channel
    assert np.all(y.numpy().min(axis=1) == y.numpy().max(axis=1))
    y = F.dropout3d(mg.ones(6, 2, 2, 2), 0.5)                                 # (C, D, H, W)
    flat = y.numpy().reshape(6, -1)
    assert np.all(flat.min(axis=1) == flat.max(axis=1))
    with pytest.warns(UserWarning, match="3-D input"):
        F.dropout2d(mg.ones(2, 3, 4), 0.5)
    with pytest.warns(UserWarning, match="2-D input"):
        y = F.dropout2d(mg.ones(64, 16), 0.5)                                 # mnist_rnn's (N, C)
    assert set(np.unique(y.numpy())) <= {0.0, 2.0}
    with pytest.raises(ShapeError, match="dropout1d"):
        F.dropout1d(mg.ones(2, 3, 4, 5), 0.5)


def test_modules_follow_train_and_eval():
    m = nn.Dropout2d(0.25)
    x = mg.ones(4, 3, 2, 2)
    m.eval()
    assert m(x) is x
    m.train()
    assert set(np.unique(m(x).numpy())) <= {np.float32(0.0), np.float32(1.0 / 0.75)}
    assert "p=0.25" in repr(m) and isinstance(nn.Dropout1d(), nn.Module) and isinstance(nn.Dropout3d(), nn.Module)
