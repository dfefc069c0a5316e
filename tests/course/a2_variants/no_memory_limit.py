"""Planted bug (part 2): _new_segment asks the source for a segment without checking memory_limit, so
mem.set_memory_limit (an 8 GB card on a bigger machine) has no effect."""
# %% [a2-bestfit]
def should_split(pool, remaining):
    """Is a remainder of ``remaining`` bytes worth its own free block?"""
    if pool == "small_pool":
        return remaining >= 512
    return remaining > 1 * MiB


class BestFitAllocator(AllocatorBase):
    """Best fit over cached free blocks, splitting what is too large; freed blocks are cached as they are."""

    def _new_segment(self, pool, size):
        """Ask the device for a segment for a (rounded) ``size``. Returns its one free block, in no free
        list, or None when the device refuses or the segment would take reserved bytes past
        ``self.memory_limit``."""
        nbytes = segment_size(size)
        # BUG: memory_limit is ignored
        got = self.source.allocate(nbytes)
        if got is None:
            return None
        address, handle = got
        return self._add_segment(address, nbytes, pool, handle).first

    def _take_best_fit(self, pool, size):
        """Remove from the pool's free list and return the smallest free block of at least ``size``
        bytes (the first such entry of the sorted list); None if there is none."""
        free = self.free_blocks[pool]
        i = bisect_left(free, (size,))
        if i == len(free):
            return None
        return free.pop(i)[3]

    def _split(self, block, size):
        """Keep the first ``size`` bytes in ``block``; the rest becomes a new free block right after it
        (linked in, and in the free list)."""
        rest = Block(block.segment, block.offset + size, block.size - size, prev=block, next=block.next)
        if block.next is not None:
            block.next.prev = rest
        block.next = rest
        block.size = size
        self._insert_free(rest)

    def _get_block(self, pool, size):
        """A free block of at least ``size`` bytes, out of the free lists: the best cached fit, else a
        new segment. Raises mg.OutOfMemoryError when there is neither."""
        block = self._take_best_fit(pool, size) or self._new_segment(pool, size)
        if block is None:
            raise mg.OutOfMemoryError(self._oom_message(size))
        return block

    def _malloc(self, nbytes):
        """Round, pick the pool, get a block, and split off the rest when it is worth keeping."""
        size = round_size(nbytes)
        pool = pool_of(size)
        block = self._get_block(pool, size)
        if should_split(pool, block.size - size):
            self._split(block, size)
        return block

    def _free(self, block):
        """Cache the freed block: back into its pool's free list (no merging yet)."""
        self._insert_free(block)
