"""A lying allocator (parts 1-4): every block starts at offset 0 of a single segment per pool. It claims
success every time and its statistics look plausible, but live blocks overlap. It must get no credit
for any test that runs an allocator (round_size and the pool rules are honest and pass)."""
# %% [a2-bump] patch
# <<<
class BumpAllocator(AllocatorBase):
# ===
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
# >>>
# <<<
        pass            # a bump allocator never reuses memory: freed bytes stay reserved
# ===
        pass            # a bump allocator never reuses memory: freed bytes stay reserved


BumpAllocator._malloc = _overlapping_malloc
# >>>
# %% [a2-bestfit] patch
# <<<
def should_split(pool, remaining):
# ===
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
# >>>
# <<<
        self._insert_free(block)
# ===
        self._insert_free(block)


BestFitAllocator._malloc = _overlapping_malloc
BestFitAllocator._free = _overlapping_free
# >>>
# %% [a2-coalesce] patch
# <<<
class CoalescingAllocator(BestFitAllocator):
# ===
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
# >>>
# <<<
        return released
# ===
        return released


CoalescingAllocator._malloc = _overlapping_malloc
CoalescingAllocator._free = _overlapping_free
# >>>
# %% [a2-oom] patch
# <<<
class StudentAllocator(CoalescingAllocator):
# ===
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
# >>>
# <<<
        return block
# ===
        return block


StudentAllocator._malloc = _overlapping_malloc
StudentAllocator._free = _overlapping_free
# >>>
