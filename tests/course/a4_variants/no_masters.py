"""Planted bug (part 3): the update is done on the float16 parameter and copied into the master, so updates
below half a float16 spacing vanish."""
# %% [a4-master] patch
# <<<
        m -= np.float32(lr) * g
        p[...] = m
# ===
        p -= (np.float32(lr) * g).astype(np.float16)    # BUG: the float16 copy takes the update
        m[...] = p
# >>>
