"""Planted bug (part 3): when blocks run out, the oldest running sequence is preempted instead of the newest."""
# %% [a10-scheduler] patch
# <<<
                victim = self.running[-1]
# ===
                victim = self.running[0]
# >>>
