"""Planted bug (part 2): Softmax and LogSoftmax exponentiate the raw logits (no max subtracted):
right for small logits, inf/NaN for logits around 1000."""
# %% [a1-softmax] patch
# <<<
    def forward(ctx, x, dim=-1):
        e = np.exp(x - x.max(axis=dim, keepdims=True))
        s = e / e.sum(axis=dim, keepdims=True)
        ctx.save_for_backward(s)
# ===
    def forward(ctx, x, dim=-1):
        with np.errstate(over="ignore", invalid="ignore"):
            e = np.exp(x)
            s = e / e.sum(axis=dim, keepdims=True)
        ctx.save_for_backward(s)
# >>>
# <<<
    def forward(ctx, x, dim=-1):
        shifted = x - x.max(axis=dim, keepdims=True)
        out = shifted - np.log(np.exp(shifted).sum(axis=dim, keepdims=True))
        ctx.save_for_backward(out)
# ===
    def forward(ctx, x, dim=-1):
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            out = x - np.log(np.exp(x).sum(axis=dim, keepdims=True))
        ctx.save_for_backward(out)
# >>>
