"""Planted bug (part 2): _split links in the remainder but forgets to shrink the block, so the block and
its remainder overlap, and the next malloc hands out memory that is still in use."""
# %% [a2-bestfit] patch
# <<<
            block.next.prev = rest
        block.next = rest
        block.size = size
        self._insert_free(rest)
# ===
            block.next.prev = rest
        block.next = rest                             # BUG: block.size is not shrunk to size
        self._insert_free(rest)
# >>>
