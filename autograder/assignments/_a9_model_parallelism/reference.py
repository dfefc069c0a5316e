"""The one-process model in float64 NumPy (parent): the tanh MLP of part 1 and the sharded linear units of
part 2, forward and analytic backward, and FSDP's flat-parameter layout."""
import numpy as np


def mlp(x, W1, b1, W2, b2, U):
    """y = tanh(x W1^T + b1) W2^T + b2 and the gradients of sum(y * U): (y, dx, dW1, db1, dW2, db2, h)."""
    h = np.tanh(x @ W1.T + b1)
    y = h @ W2.T + b2
    dh = (U @ W2) * (1 - h ** 2)
    return y, dh @ W1, dh.T @ x, dh.sum(0), U.T @ h, U.sum(0), h


def flat_padded(arrays, n):
    """The arrays flattened and concatenated, zero-padded to a multiple of n: (flat, chunk length)."""
    flat = np.concatenate([np.ravel(a) for a in arrays]).astype(np.float64)
    k = -(-flat.size // n)
    return np.pad(flat, (0, k * n - flat.size)), k


def unflatten(flat, o, i):
    return flat[:o * i].reshape(o, i), flat[o * i:o * i + o]


def passes(layers, X, U):
    """Tanh-joined linear layers [(W, b)] on rows X, the mean over rows of sum(y * U): every layer's input and
    output (``hs``), the gradient w.r.t. every layer's input (``gins``) and each layer's (dW, db)."""
    hs = [X]
    for k, (W, b) in enumerate(layers):
        a = hs[-1] @ W.T + b
        hs.append(np.tanh(a) if k < len(layers) - 1 else a)
    g, gins, grads = U / len(X), [None] * len(layers), []
    for k in reversed(range(len(layers))):
        if k < len(layers) - 1:
            g = g * (1 - hs[k + 1] ** 2)
        grads.insert(0, (g.T @ hs[k], g.sum(0)))
        g = g @ layers[k][0]
        gins[k] = g
    return hs, gins, grads


def forward_backward(layers, X, U):
    """The output, X's gradient and each layer's (dW, db)."""
    hs, gins, grads = passes(layers, X, U)
    return hs[-1], gins[0], grads


def sgd_step(layers, X, U, lr):
    _, _, grads = forward_backward(layers, X, U)
    return [(W - lr * dW, b - lr * db) for (W, b), (dW, db) in zip(layers, grads)]
