# Adam with L2 regularisation (the decay goes through m and v) instead of AdamW's decoupled decay.
# %% [a3-adamw] patch
# <<<
                g, x = p.grad.data, p.data
# ===
                g, x = p.grad.data + wd * p.data, p.data
# >>>
# <<<
                x *= 1 - lr * wd                           # decoupled weight decay
# ===
# >>>
