"""Planted bug (part 3): a tensor is checked only against placed tensors that started before it, so one
that starts later but overlaps its lifetime can be given the same memory."""
# %% [a5-planner] patch
# <<<
        overlapping = sorted((o, s) for o, s, a, b in placed if a < ends[i] and starts[i] < b)
# ===
        overlapping = sorted((o, s) for o, s, a, b in placed if a <= starts[i] < b)   # BUG: misses later starts
# >>>
