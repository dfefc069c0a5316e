"""Planted bug (part 4): no casts, the forward runs in float32 and saves float32 activations."""
# %% [a4-forward] patch
# <<<
    h = F.relu(F.linear(x.half(), W1.half(), b1.half()))
    logits = F.linear(h, W2.half(), b2.half())
# ===
    h = F.relu(F.linear(x, W1, b1))               # BUG: nothing in float16
    logits = F.linear(h, W2, b2)
# >>>
