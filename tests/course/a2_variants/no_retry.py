"""Planted bug (part 4): on a full device _get_block raises OutOfMemoryError at once, without releasing
the cached free segments and retrying."""
# %% [a2-oom] patch
# <<<
        block = self._take_best_fit(pool, size) or self._new_segment(pool, size)
        if block is None:
            self.num_alloc_retries += 1
            self._empty_cache()
            block = self._take_best_fit(pool, size) or self._new_segment(pool, size)
        if block is None:
# ===
        block = self._take_best_fit(pool, size) or self._new_segment(pool, size)
        # BUG: no empty_cache() and retry
        if block is None:
# >>>
