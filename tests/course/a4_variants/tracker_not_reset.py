"""Planted bug (part 1): an overflow halves the scale but keeps counting clean steps, so the next growth
comes too early. Later parts are graded with the reference LossScaler: the bug must not cascade."""
# %% [a4-scaler] patch
# <<<
            self.scale *= self.backoff_factor
            self.growth_tracker = 0
# ===
            self.scale *= self.backoff_factor         # BUG: growth_tracker not reset
# >>>
