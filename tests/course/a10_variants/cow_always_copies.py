"""Planted bug (part 2): copy_on_write copies even when the writer is the block's only owner."""
# %% [a10-allocator] patch
# <<<
        if self.refs[b] == 1:
            return b, False
        new = self.allocate()
# ===
        new = self.allocate()
# >>>
