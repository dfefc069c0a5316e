# The recipe's learning rate ignored: AdamW's default (1e-3) is too slow for 20 steps.
# %% [a11-train] patch
# <<<
    opt = mg.optim.AdamW(params, lr=lr)
# ===
    opt = mg.optim.AdamW(params)
# >>>
