"""Planted bug (part 2): allocate() on an empty free list lets list.pop's IndexError escape."""
# %% [a10-allocator] patch
# <<<
        if not self.free_ids:
            raise OutOfMemoryError(f"BlockAllocator: all {self.num_blocks} blocks are in use")
        b = self.free_ids.pop()
# ===
        b = self.free_ids.pop()
# >>>
