# Warmup that starts at 0 and reaches base_lr one step early.
# %% [a3-schedule] patch
# <<<
        return base_lr * (t + 1) / (warmup_steps + 1)
# ===
        return base_lr * t / warmup_steps
# >>>
