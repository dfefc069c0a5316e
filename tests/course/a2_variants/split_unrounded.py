"""Planted bug (part 2): _malloc splits the block at the requested byte count instead of the rounded size,
so the next block starts at an address that is not a multiple of 512."""
# %% [a2-bestfit] patch
# <<<
        block = self._get_block(pool, size)
        if should_split(pool, block.size - size):
            self._split(block, size)
        return block
# ===
        block = self._get_block(pool, size)
        if should_split(pool, block.size - nbytes):
            self._split(block, nbytes)                # BUG: nbytes, not the rounded size
        return block
# >>>
