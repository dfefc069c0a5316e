"""Planted bug (part 3): master_step ignores found_inf and steps anyway."""
# %% [a4-master] patch
# <<<
    if found_inf:
        return
# ===
# >>>
