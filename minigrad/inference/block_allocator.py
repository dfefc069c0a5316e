"""The block allocator: fixed-size KV blocks, a free list and reference counts (vLLM's design).

The paged KV cache cuts the cache into blocks of ``block_size`` token slots (all layers' keys and values
for those slots). This class decides only *which block ids are in use and by how many owners*; it never
touches tokens or memory. Four operations, each O(1):

* ``allocate()``        the next free block, with reference count 1 (the caller owns it);
* ``free(b)``           drop one reference; at 0 the block goes back to the free list;
* ``share(b)``          one more owner of an allocated block (two sequences with the same prompt prefix);
* ``copy_on_write(b)``  before writing into ``b``: if others share it, the writer gets a fresh block of its
                        own (and must copy the contents); if it is the only owner, it keeps ``b``.

Everything it knows is observable from outside (``ref_count``, ``free_block_ids``): a grader replaying a
trace checks that no block is leaked, double-owned or freed twice. ``BlockManager`` (``block_manager.py``)
maps sequences to blocks through this interface only, so another allocator with the same five methods
(a student's) can replace it.
"""
import numbers
from collections import deque

from ..errors import ArgumentError, OutOfMemoryError


class NoFreeBlocksError(OutOfMemoryError):
    """The block pool is exhausted (the scheduler preempts before this can happen)."""


class BlockAllocator:
    def __init__(self, num_blocks):
        if int(num_blocks) < 1:
            raise ArgumentError(f"BlockAllocator: num_blocks must be >= 1, got {num_blocks}")
        self.num_blocks = int(num_blocks)
        self._free = deque(range(self.num_blocks))     # lowest ids first: a fresh pool fills from block 0
        self._refs = [0] * self.num_blocks

    def allocate(self):
        """A free block id with reference count 1."""
        if not self._free:
            raise NoFreeBlocksError(f"BlockAllocator: all {self.num_blocks} blocks are in use")
        b = self._free.popleft()
        self._refs[b] = 1
        return b

    def free(self, block_id):
        """Drop one reference to ``block_id``; returns True when that was the last (the block is free)."""
        self._check_live("free", block_id)
        self._refs[block_id] -= 1
        if self._refs[block_id] == 0:
            self._free.append(block_id)
            return True
        return False

    def share(self, block_id):
        """Add an owner to an allocated block; returns it."""
        self._check_live("share", block_id)
        self._refs[block_id] += 1
        return block_id

    def copy_on_write(self, block_id):
        """``(block, copied)``: the block the caller may write. Sole owner: ``(block_id, False)``. Shared:
        one reference moves to a new block, ``(new, True)``, and the caller copies the contents over."""
        self._check_live("copy_on_write", block_id)
        if self._refs[block_id] == 1:
            return block_id, False
        new = self.allocate()
        self._refs[block_id] -= 1
        return new, True

    def ref_count(self, block_id):
        return self._refs[block_id]

    @property
    def num_free_blocks(self):
        return len(self._free)

    @property
    def free_block_ids(self):
        return list(self._free)

    def _check_live(self, op, block_id):
        if not (isinstance(block_id, numbers.Integral) and 0 <= block_id < self.num_blocks):
            raise ArgumentError(f"BlockAllocator.{op}: no block {block_id!r} (ids are 0..{self.num_blocks - 1})")
        if self._refs[block_id] == 0:
            raise ArgumentError(f"BlockAllocator.{op}: block {block_id} is not allocated (freed twice?)")

    def __repr__(self):
        return f"BlockAllocator({self.num_blocks} blocks, {self.num_free_blocks} free)"
