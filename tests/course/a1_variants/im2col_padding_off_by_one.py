"""Planted bug (part 4): im2col counts the padding once instead of twice in the output size
(H + padding instead of H + 2*padding): right without padding, one output row and column short with it."""
# %% [a1-im2col] patch
# <<<
def im2col(x, kh, kw, stride=1, padding=0):
    """(N, C, H, W) -> (N*OH*OW, C*kh*kw): every window as a row, in (c, i, j) order."""
    N, C, H, W = x.shape
    OH, OW = conv_out_size(H, kh, stride, padding), conv_out_size(W, kw, stride, padding)
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
# ===
def im2col(x, kh, kw, stride=1, padding=0):
    N, C, H, W = x.shape
    OH, OW = (H + padding - kh) // stride + 1, (W + padding - kw) // stride + 1
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
# >>>
# <<<
def col2im(cols, x_shape, kh, kw, stride=1, padding=0):
    """The adjoint of im2col: scatter-add the rows of `cols` back into an array of shape x_shape."""
    N, C, H, W = x_shape
# ===
def col2im(cols, x_shape, kh, kw, stride=1, padding=0):
    N, C, H, W = x_shape
# >>>
