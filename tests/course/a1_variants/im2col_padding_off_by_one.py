"""Planted bug (part 4): im2col counts the padding once instead of twice in the output size
(H + padding instead of H + 2*padding): right without padding, one output row and column short with it."""
# %% [a1-im2col]
def conv_out_size(n, k, stride, padding):
    return (n + 2 * padding - k) // stride + 1


def im2col(x, kh, kw, stride=1, padding=0):
    N, C, H, W = x.shape
    OH, OW = (H + padding - kh) // stride + 1, (W + padding - kw) // stride + 1
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    cols = np.empty((N, OH, OW, C, kh, kw), dtype=x.dtype)
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i:i + stride * (OH - 1) + 1:stride, j:j + stride * (OW - 1) + 1:stride]
            cols[:, :, :, :, i, j] = patch.transpose(0, 2, 3, 1)
    return cols.reshape(N * OH * OW, C * kh * kw)


def col2im(cols, x_shape, kh, kw, stride=1, padding=0):
    N, C, H, W = x_shape
    OH, OW = conv_out_size(H, kh, stride, padding), conv_out_size(W, kw, stride, padding)
    cols = cols.reshape(N, OH, OW, C, kh, kw)
    xp = np.zeros((N, C, H + 2 * padding, W + 2 * padding), dtype=cols.dtype)
    for i in range(kh):
        for j in range(kw):
            xp[:, :, i:i + stride * (OH - 1) + 1:stride, j:j + stride * (OW - 1) + 1:stride] += \
                cols[:, :, :, :, i, j].transpose(0, 3, 1, 2)
    return xp[:, :, padding:padding + H, padding:padding + W]
