"""Planted bug (part 4): on a full device _get_block raises OutOfMemoryError at once, without releasing
the cached free segments and retrying."""
# %% [a2-oom]
class StudentAllocator(CoalescingAllocator):
    """The complete caching allocator: on a full device, drop the cache and retry once, then give up."""

    def _get_block(self, pool, size):
        """As BestFitAllocator._get_block; but when neither a cached block nor a new segment is available,
        release the cache, count a retry and try once more, and raise mg.OutOfMemoryError (counted in
        num_ooms) only if that fails too."""
        block = self._take_best_fit(pool, size) or self._new_segment(pool, size)
        # BUG: no empty_cache() and retry
        if block is None:
            self.num_ooms += 1
            raise mg.OutOfMemoryError(self._oom_message(size))
        return block
