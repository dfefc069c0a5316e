"""Planted bug (part 2): a block whose last reference is freed never goes back on the free list."""
# %% [a10-allocator] patch
# <<<
        if self.refs[b] == 0:
            self.free_ids.append(b)
            return True
# ===
        if self.refs[b] == 0:
            return True
# >>>
