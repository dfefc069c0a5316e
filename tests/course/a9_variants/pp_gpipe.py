# The schedule runs every forward, then every backward (GPipe): right gradients and the same bubble, but each
# stage holds all m micro-batches' activations.
# %% [a9-1f1b] patch
# <<<
    saved, warmup = {}, min(stage.size - stage.rank - 1, m)
# ===
    saved, warmup = {}, m
# >>>
