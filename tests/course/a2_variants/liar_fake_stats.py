"""A lying allocator (parts 3 and 4): it asks the device for four times the memory it registers, so its
own statistics (memory_reserved, memory_summary) look normal while it actually holds 4x. It must
get no credit for any test that measures memory: the grader counts what the device handed out."""
# %% [a2-coalesce] patch
# <<<
class CoalescingAllocator(BestFitAllocator):
    """Best fit + splitting, and a freed block merges with its free neighbours."""

# ===
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

# >>>
# %% [a2-oom] patch
# <<<
class StudentAllocator(CoalescingAllocator):
    """The complete caching allocator: on a full device, drop the cache and retry once, then give up."""

# ===
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

# >>>
