"""Planted bug (part 2): _take_best_fit takes the first free block that is large enough, in address order
(first fit), instead of the smallest one."""
# %% [a2-bestfit] patch
# <<<
        bytes (the first such entry of the sorted list); None if there is none."""
        free = self.free_blocks[pool]
        i = bisect_left(free, (size,))
        if i == len(free):
            return None
        return free.pop(i)[3]

# ===
        bytes (the first such entry of the sorted list); None if there is none."""
        for seg in sorted(self.segments.values(), key=lambda s: s.id):     # BUG: first fit
            if seg.pool != pool:
                continue
            for b in seg.blocks():
                if not b.allocated and b.size >= size and any(e[3] is b for e in self.free_blocks[pool]):
                    self._remove_free(b)
                    return b
        return None

# >>>
