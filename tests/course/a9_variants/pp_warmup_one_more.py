# One warm-up forward too many: p - rank instead of p - rank - 1.
# %% [a9-1f1b] patch
# <<<
    saved, warmup = {}, min(stage.size - stage.rank - 1, m)
# ===
    saved, warmup = {}, min(stage.size - stage.rank, m)
# >>>
