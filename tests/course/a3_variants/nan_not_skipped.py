# No finiteness check: a NaN micro-batch poisons the parameters.
# %% [a3-accum] patch
# <<<
    if not finite or not math.isfinite(loss_sum):
# ===
    if False:
# >>>
