"""Planted bug (part 1): the causal mask of the new queries is aligned to the top left (query i sees keys
0..i), right only when nothing was cached before the chunk."""
# %% [a10-cache] patch
# <<<
        mask = mg.ones(L, S, dtype="bool").tril(S - L)
# ===
        mask = mg.ones(L, S, dtype="bool").tril(0)
# >>>
