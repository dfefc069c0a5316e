"""Op workspaces outside the pool, measured with tracemalloc (NumPy reports its arrays to it): batch norm's
forward holds its output and x_hat and nothing more, its backward one activation-sized array less than before;
a convolution's input gradient holds one kernel offset's columns at a time, not all of them."""
import tracemalloc

import numpy as np

import minigrad as mg
from minigrad.nn import functional as F


def peak_of(fn):
    tracemalloc.start()
    try:
        out = fn()
        return tracemalloc.get_traced_memory()[1], out
    finally:
        tracemalloc.stop()


def test_batch_norm_holds_two_activations_forward_and_backward():
    rng = np.random.default_rng(0)
    x = mg.tensor(rng.standard_normal((16, 8, 32, 32), dtype=np.float32), requires_grad=True)
    w, b = mg.ones(8, requires_grad=True), mg.zeros(8, requires_grad=True)
    act = x.array.nbytes                                            # 512 KiB
    peak, y = peak_of(lambda: F.batch_norm(x, None, None, w, b, training=True))
    assert peak <= 2.1 * act                   # output + x_hat (3.07 activations before: a third for the squares)
    g = mg.tensor(rng.standard_normal(y.shape, dtype=np.float32))
    peak, _ = peak_of(lambda: y.backward(g))
    assert peak <= 3.1 * act                   # g_hat, dx and one more (4.07 before: dW's temporary beside them)
    xn = x.detach().numpy()
    ref = (xn - xn.mean(axis=(0, 2, 3), keepdims=True)) / np.sqrt(xn.var(axis=(0, 2, 3), keepdims=True) + 1e-5)
    np.testing.assert_allclose(y.detach().numpy(), ref, rtol=1e-4, atol=1e-4)


def test_conv_input_gradient_holds_one_offsets_columns():
    rng = np.random.default_rng(0)
    x = mg.tensor(rng.standard_normal((16, 16, 32, 32), dtype=np.float32), requires_grad=True)
    w = mg.tensor(rng.standard_normal((16, 16, 3, 3), dtype=np.float32) * 0.1)
    y = F.conv2d(x, w, padding=1)
    act = x.array.nbytes                                            # 1 MiB; 9 offsets' columns: 9 MiB
    g = mg.tensor(rng.standard_normal(y.shape, dtype=np.float32))
    peak, _ = peak_of(lambda: y.backward(g))
    assert peak <= 5.5 * act                   # 12.2 activations before: the 9 offsets' columns at once
    gn, wn = g.numpy(), w.numpy()                       # dx = sum over offsets of g shifted, times W_k
    ref = np.zeros((16, 16, 34, 34), np.float32)
    for i in range(3):
        for j in range(3):
            ref[:, :, i:i + 32, j:j + 32] += np.einsum("nohw,oc->nchw", gn, wn[:, :, i, j])
    np.testing.assert_allclose(x.grad.numpy(), ref[:, :, 1:33, 1:33], rtol=1e-4, atol=1e-4)
