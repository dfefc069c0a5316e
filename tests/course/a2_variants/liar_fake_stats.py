"""A lying allocator (parts 3 and 4): it asks the device for four times the memory it registers, so its
own statistics (memory_reserved, memory_summary) look normal while it actually holds 4x. It must
get no credit for any test that measures memory: the grader counts what the device handed out."""
# %% [a2-coalesce]
def _lying_new_segment(self, pool, size):
    """Reserve four times the segment it registers; the statistics only ever show the registered size."""
    nbytes = segment_size(size)
    if self.memory_limit is not None and self.reserved_bytes() + nbytes > self.memory_limit:
        return None
    got = self.source.allocate(4 * nbytes)         # LIE: 4x what the statistics will say
    if got is None:
        return None
    return self._add_segment(got[0], nbytes, pool, got[1]).first


class CoalescingAllocator(BestFitAllocator):
    """Best fit + splitting, and a freed block merges with its free neighbours."""
    _new_segment = _lying_new_segment

    def reserved_bytes(self):                     # LIE: report what is allocated
        return self.allocated_bytes()

    def _coalesce(self, block):
        """Merge the just-freed ``block`` with its free ``next`` and ``prev`` neighbours (taking them out
        of the free list); return the merged block (not in the free list)."""
        nxt = block.next
        if nxt is not None and not nxt.allocated:
            self._remove_free(nxt)
            block.size += nxt.size
            block.next = nxt.next
            if nxt.next is not None:
                nxt.next.prev = block
        prv = block.prev
        if prv is not None and not prv.allocated:
            self._remove_free(prv)
            prv.size += block.size
            prv.next = block.next
            if block.next is not None:
                block.next.prev = prv
            block = prv
        return block

    def _free(self, block):
        """Merge the freed block with its free neighbours, then cache the result."""
        self._insert_free(self._coalesce(block))

    def _empty_cache(self):
        """Release every segment that is one free block; return the bytes released."""
        released = 0
        for seg in [s for s in self.segments.values() if s.is_free()]:
            self._remove_free(seg.first)
            self._remove_segment(seg)
            self.source.release(seg.handle)
            released += seg.size
        return released
# %% [a2-oom]
def _lying_new_segment(self, pool, size):
    """Reserve four times the segment it registers; the statistics only ever show the registered size."""
    nbytes = segment_size(size)
    if self.memory_limit is not None and self.reserved_bytes() + nbytes > self.memory_limit:
        return None
    got = self.source.allocate(4 * nbytes)         # LIE: 4x what the statistics will say
    if got is None:
        return None
    return self._add_segment(got[0], nbytes, pool, got[1]).first


class StudentAllocator(CoalescingAllocator):
    """The complete caching allocator: on a full device, drop the cache and retry once, then give up."""
    _new_segment = _lying_new_segment

    def reserved_bytes(self):                     # LIE: report what is allocated
        return self.allocated_bytes()

    def _get_block(self, pool, size):
        """As BestFitAllocator._get_block; but when neither a cached block nor a new segment is available,
        release the cache, count a retry and try once more, and raise mg.OutOfMemoryError (counted in
        num_ooms) only if that fails too."""
        block = self._take_best_fit(pool, size) or self._new_segment(pool, size)
        if block is None:
            self.num_alloc_retries += 1
            self._empty_cache()
            block = self._take_best_fit(pool, size) or self._new_segment(pool, size)
        if block is None:
            self.num_ooms += 1
            raise mg.OutOfMemoryError(self._oom_message(size))
        return block
