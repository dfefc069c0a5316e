"""Planted bug (part 3): free() caches the block as it is and never merges it with its free neighbours,
so freed memory stays in pieces, segments never become whole again and empty_cache() releases little."""
# %% [a2-coalesce]
class CoalescingAllocator(BestFitAllocator):
    """Best fit + splitting, and a freed block merges with its free neighbours."""

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
        self._insert_free(block)              # BUG: no coalescing

    def _empty_cache(self):
        """Release every segment that is one free block; return the bytes released."""
        released = 0
        for seg in [s for s in self.segments.values() if s.is_free()]:
            self._remove_free(seg.first)
            self._remove_segment(seg)
            self.source.release(seg.handle)
            released += seg.size
        return released
