"""Planted bug (part 1): the scale grows after growth_interval + 1 clean steps (off by one)."""
# %% [a4-scaler] patch
# <<<
            if self.growth_tracker == self.growth_interval:
# ===
            if self.growth_tracker > self.growth_interval:    # BUG: one step late
# >>>
