"""Planted bug (part 2): free() puts the block back on the free list whatever its reference count."""
# %% [a10-allocator] patch
# <<<
        self.refs[b] -= 1
        if self.refs[b] == 0:
            self.free_ids.append(b)
            return True
        return False
# ===
        self.refs[b] -= 1
        self.free_ids.append(b)
        return True
# >>>
