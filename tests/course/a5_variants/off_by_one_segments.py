"""Planted bug (part 2): the loop checkpoints one segment too many (the last one too), an off-by-one in
the segment bounds: gradients stay right, but the wrong functions are recomputed."""
# %% [a5-sequential] patch
# <<<
    for start in range(0, size * (segments - 1), size):
# ===
    for start in range(0, size * segments, size):     # BUG: segments, not segments - 1
# >>>
