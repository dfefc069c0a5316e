"""Planted bug (part 2): _new_segment asks the source for a segment without checking memory_limit, so
mem.set_memory_limit (an 8 GB card on a bigger machine) has no effect."""
# %% [a2-bestfit] patch
# <<<
        nbytes = segment_size(size)
        if self.memory_limit is not None and self.reserved_bytes() + nbytes > self.memory_limit:
            return None
        got = self.source.allocate(nbytes)
# ===
        nbytes = segment_size(size)
        # BUG: memory_limit is ignored
        got = self.source.allocate(nbytes)
# >>>
