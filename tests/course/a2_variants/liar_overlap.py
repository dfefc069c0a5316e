"""A lying allocator (parts 1-4): every block starts at offset 0 of a single segment per pool. It claims
success every time and its statistics look plausible, but live blocks overlap. It must get no credit
for any test that runs an allocator (round_size and the pool rules are honest and pass)."""
# %% [a2-bump]
def _overlapping_malloc(self, nbytes):
    """Every block starts at offset 0 of the pool's one segment: tiny peak, plausible statistics."""
    size = round_size(nbytes)
    pool = pool_of(size)
    seg = next((s for s in self.segments.values() if s.pool == pool and s.size >= size), None)
    if seg is None:
        n = segment_size(size)
        got = self.source.allocate(n)
        if got is None:
            raise mg.OutOfMemoryError(self._oom_message(nbytes))
        seg = self._add_segment(got[0], n, pool, got[1])
    return Block(seg, 0, size)                      # LIE: shared by every live block


def _overlapping_free(self, block):
    pass


class BumpAllocator(AllocatorBase):
    """Carves blocks one after another from the current segment of each pool; never reuses memory."""

    def __init__(self, source, device_name="cpu"):
        super().__init__(source, device_name)
        self.current = {p: None for p in POOLS}   # the segment each pool is carving
        self.top = {p: 0 for p in POOLS}          # offset of its first unused byte

    def _malloc(self, nbytes):
        """The next round_size(nbytes) bytes of the pool's current segment (a new segment if they do
        not fit)."""
        size = round_size(nbytes)
        pool = pool_of(size)
        seg = self.current[pool]
        if seg is None or self.top[pool] + size > seg.size:
            nseg = segment_size(size)
            got = self.source.allocate(nseg)
            if got is None:
                raise mg.OutOfMemoryError(self._oom_message(nbytes))
            seg = self.current[pool] = self._add_segment(got[0], nseg, pool, got[1])
            self.top[pool] = 0
        block = Block(seg, self.top[pool], size)
        self.top[pool] += size
        return block

    def _free(self, block):
        pass            # a bump allocator never reuses memory: freed bytes stay reserved


BumpAllocator._malloc = _overlapping_malloc
# %% [a2-bestfit]
def _overlapping_malloc(self, nbytes):
    """Every block starts at offset 0 of the pool's one segment: tiny peak, plausible statistics."""
    size = round_size(nbytes)
    pool = pool_of(size)
    seg = next((s for s in self.segments.values() if s.pool == pool and s.size >= size), None)
    if seg is None:
        n = segment_size(size)
        got = self.source.allocate(n)
        if got is None:
            raise mg.OutOfMemoryError(self._oom_message(nbytes))
        seg = self._add_segment(got[0], n, pool, got[1])
    return Block(seg, 0, size)                      # LIE: shared by every live block


def _overlapping_free(self, block):
    pass


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
        if self.memory_limit is not None and self.reserved_bytes() + nbytes > self.memory_limit:
            return None
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


BestFitAllocator._malloc = _overlapping_malloc
BestFitAllocator._free = _overlapping_free
# %% [a2-coalesce]
def _overlapping_malloc(self, nbytes):
    """Every block starts at offset 0 of the pool's one segment: tiny peak, plausible statistics."""
    size = round_size(nbytes)
    pool = pool_of(size)
    seg = next((s for s in self.segments.values() if s.pool == pool and s.size >= size), None)
    if seg is None:
        n = segment_size(size)
        got = self.source.allocate(n)
        if got is None:
            raise mg.OutOfMemoryError(self._oom_message(nbytes))
        seg = self._add_segment(got[0], n, pool, got[1])
    return Block(seg, 0, size)                      # LIE: shared by every live block


def _overlapping_free(self, block):
    pass


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


CoalescingAllocator._malloc = _overlapping_malloc
CoalescingAllocator._free = _overlapping_free
# %% [a2-oom]
def _overlapping_malloc(self, nbytes):
    """Every block starts at offset 0 of the pool's one segment: tiny peak, plausible statistics."""
    size = round_size(nbytes)
    pool = pool_of(size)
    seg = next((s for s in self.segments.values() if s.pool == pool and s.size >= size), None)
    if seg is None:
        n = segment_size(size)
        got = self.source.allocate(n)
        if got is None:
            raise mg.OutOfMemoryError(self._oom_message(nbytes))
        seg = self._add_segment(got[0], n, pool, got[1])
    return Block(seg, 0, size)                      # LIE: shared by every live block


def _overlapping_free(self, block):
    pass


class StudentAllocator(CoalescingAllocator):
    """The complete caching allocator: on a full device, drop the cache and retry once, then give up."""

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


StudentAllocator._malloc = _overlapping_malloc
StudentAllocator._free = _overlapping_free
