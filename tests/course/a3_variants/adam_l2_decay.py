# Adam with L2 regularisation (the decay goes through m and v) instead of AdamW's decoupled decay.
# %% [a3-adamw] patch
# <<<
                g, x = p.grad.array, p.array
# ===
                g, x = p.grad.array + wd * p.array, p.array
# >>>
# <<<
                x *= 1 - lr * wd                           # decoupled weight decay
# ===
# >>>
