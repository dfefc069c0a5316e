"""Planted bug (part 3): free() caches the block as it is and never merges it with its free neighbours,
so freed memory stays in pieces, segments never become whole again and empty_cache() releases little."""
# %% [a2-coalesce] patch
# <<<
        """Merge the freed block with its free neighbours, then cache the result."""
        self._insert_free(self._coalesce(block))

# ===
        """Merge the freed block with its free neighbours, then cache the result."""
        self._insert_free(block)              # BUG: no coalescing

# >>>
