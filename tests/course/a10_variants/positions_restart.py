"""Planted bug (part 1): position_ids start at 0 for every call, so decoded tokens get the prompt's positions."""
# %% [a10-cache] patch
# <<<
        start = len(self.layers[0])
# ===
        start = 0
# >>>
