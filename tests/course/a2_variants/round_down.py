"""Planted bug (part 1): round_size rounds down, so blocks are smaller than what was asked for. Parts 2-4
are graded with the reference round_size: the bug must not cascade."""
# %% [a2-sizes] patch
# <<<
        return 512
    return -(-nbytes // 512) * 512

# ===
        return 512
    return nbytes // 512 * 512                # BUG: rounds down

# >>>
