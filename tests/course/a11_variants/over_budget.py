# The plain loop: the whole batch at once (no micro-batches). It reaches the loss, but its peak is about
# 2 MiB, over the 1.4 MiB budget.
# %% [a11-train] patch
# <<<
    micro = batch_size
    while micro > 1 and fixed + micro * per_row > 0.9 * budget:   # a 10 % margin
        micro //= 2                                           # halves: the largest that fits is the fastest
# ===
    micro = batch_size
# >>>
