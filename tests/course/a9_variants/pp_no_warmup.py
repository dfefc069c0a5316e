# No warm-up: every stage runs a micro-batch's forward and then waits for its backward, so each micro-batch
# goes through the whole pipeline and back before the next starts: the stages run one after another.
# %% [a9-1f1b] patch
# <<<
    saved, warmup = {}, min(stage.size - stage.rank - 1, m)
# ===
    saved, warmup = {}, 0
# >>>
