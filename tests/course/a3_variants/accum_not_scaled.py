# Micro-batch losses summed, not averaged: the gradient is k times the full batch's.
# %% [a3-accum] patch
# <<<
        loss = loss_fn(x, y) * (len(x) / total)
# ===
        loss = loss_fn(x, y)
# >>>
