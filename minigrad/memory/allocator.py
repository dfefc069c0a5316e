"""A caching allocator in the style of PyTorch's CUDACachingAllocator, device-agnostic.

Why cache at all? Asking the device for memory (``cudaMalloc``, or ``malloc`` of a big arena) is slow and,
on a GPU, synchronises the device; freeing is just as bad. A deep-learning step allocates and frees the
same few shapes over and over, so the allocator keeps what it got from the device (*segments*) and carves
requests out of them (*blocks*). Freed blocks stay cached for the next request of a similar size.

The whole algorithm, in the order ``malloc`` runs it:

1. **Round** the request up to a multiple of 512 bytes (``round_size``), so that sizes repeat and
   neighbouring blocks stay aligned.
2. Pick the **pool**: requests of at most 1 MiB go to the *small* pool, larger ones to the *large* pool.
   Keeping them apart stops tiny tensors from pinning pieces of the big segments.
3. **Best fit**: take the smallest cached free block of that pool that is large enough. Free blocks are
   kept in a list sorted by ``(size, segment id, offset)``, so this is one ``bisect``.
4. If none fits, ask the **source** for a new segment: 2 MiB for the small pool, 20 MiB for requests
   below 10 MiB, otherwise the request rounded up to 2 MiB (a segment of its own).
5. **Out of memory**: if the source (or the memory limit) refuses, release every cached free segment
   (``empty_cache``) and retry once; if that fails too, raise ``OutOfMemoryError`` with a summary.
6. **Split**: if the block is larger than needed, cut off the remainder as a new free block, but only
   when the remainder is worth keeping: >= 512 B in the small pool, > 1 MiB in the large pool. A smaller
   remainder stays inside the allocated block (internal fragmentation, counted in ``allocated``).

**Tight** (``set_memory_limit(n, tight=True)``, for a training run under a budget) changes two things.
4b. A new segment is just the block (no 2/20 MiB rounding): the spare room a rounded segment keeps
    for later requests is traded for bytes, and a freed block is a whole free segment that the
    out-of-memory retry can release (small blocks cannot pin a large segment). Step 3 reuses only a
    cached block of exactly the size (no split, no block larger than asked for).
4c. ``borrow``: memory the caller already holds (on CPU, the array NumPy made for an op's result) becomes a
    segment of its own instead of being copied into a block. NumPy cannot be told where to put a
    result (its allocator hook is C-only), so copying it means two copies at once, and time; borrowing
    costs neither. A borrowed segment is never cached: freeing its block releases it.

``free`` marks the block free and **coalesces** it with free neighbours in the same segment, so a segment
whose blocks are all free becomes one block again and ``empty_cache`` can hand it back to the device.

Blocks of a segment form a doubly linked list in address order (``prev``/``next``); that is what makes
coalescing O(1). The allocator never touches memory itself: a *segment source* hands out raw memory
(``sources.CPUSource`` real NumPy arenas, ``cupy_pool.CupySource`` cudaMalloc, ``sources.SimulatedSource``
addresses only) and the caller turns blocks into arrays.
"""
from bisect import bisect_left, insort

from ..errors import OutOfMemoryError
from .stats import format_bytes, fragmentation_of, summary

KiB = 1024
MiB = 1024 * KiB

MIN_BLOCK_SIZE = 512          # every size is a multiple of this (cudaMalloc's alignment)
SMALL_SIZE = 1 * MiB          # largest request served by the small pool
SMALL_BUFFER = 2 * MiB        # segment size of the small pool
MIN_LARGE_ALLOC = 10 * MiB    # requests below this share 20 MiB segments...
LARGE_BUFFER = 20 * MiB       # ...of this size
ROUND_LARGE = 2 * MiB         # larger requests get a segment of their own, rounded to this

POOLS = ("small_pool", "large_pool")


def round_size(nbytes):
    """Request size -> block size: at least 512 bytes, rounded up to a multiple of 512."""
    if nbytes < MIN_BLOCK_SIZE:
        return MIN_BLOCK_SIZE
    return -(-nbytes // MIN_BLOCK_SIZE) * MIN_BLOCK_SIZE


def segment_size(size):
    """How much to ask the source for when no cached block fits a (rounded) request."""
    if size <= SMALL_SIZE:
        return SMALL_BUFFER
    if size < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return -(-size // ROUND_LARGE) * ROUND_LARGE


def pool_of(size):
    """Which pool serves a (rounded) request."""
    return "small_pool" if size <= SMALL_SIZE else "large_pool"


def should_split(pool_name, remaining):
    """Is a remainder of ``remaining`` bytes worth its own free block? (PyTorch's rule)."""
    if pool_name == "small_pool":
        return remaining >= MIN_BLOCK_SIZE
    return remaining > SMALL_SIZE


class Segment:
    """One piece of memory obtained from the source; carved into blocks."""

    __slots__ = ("id", "address", "size", "pool", "handle", "first", "borrowed")

    def __init__(self, id, address, size, pool, handle, borrowed=False):
        self.id = id
        self.address = address
        self.size = size
        self.pool = pool        # "small_pool" or "large_pool"
        self.handle = handle    # whatever the source needs to release it (a NumPy arena, a cupy Memory)
        self.first = None       # first block (lowest address)
        self.borrowed = borrowed  # memory the caller held (``borrow``): released when its block is freed

    def blocks(self):
        """The blocks of this segment in address order."""
        b = self.first
        while b is not None:
            yield b
            b = b.next

    def is_free(self):
        """True when the whole segment is one free block (so it can be released)."""
        return not self.first.allocated and self.first.next is None


class Block:
    """A contiguous range ``[offset, offset + size)`` of a segment, free or allocated."""

    __slots__ = ("segment", "offset", "size", "address", "allocated", "requested", "cause", "prev",
                 "next")

    def __init__(self, segment, offset, size, prev=None, next=None):
        self.segment = segment
        self.offset = offset
        self.size = size
        self.address = segment.address + offset
        self.allocated = False
        self.requested = 0      # the caller's byte count before rounding (0 when free)
        self.cause = None       # op/label that allocated it (for snapshots)
        self.prev = prev
        self.next = next

    def key(self):
        """Sort key of the free lists: best fit = smallest size; ties broken by position."""
        return (self.size, self.segment.id, self.offset)

    def __repr__(self):
        state = "allocated" if self.allocated else "free"
        return f"Block({state}, size={self.size}, segment={self.segment.id}, offset={self.offset})"


class Stat:
    """One statistic, tracked the way PyTorch does: current, peak, and cumulative in/out."""

    __slots__ = ("current", "peak", "allocated", "freed")

    def __init__(self):
        self.current = self.peak = self.allocated = self.freed = 0

    def increase(self, n):
        self.current += n
        self.allocated += n
        if self.current > self.peak:
            self.peak = self.current

    def decrease(self, n):
        self.current -= n
        self.freed += n

    def reset_peak(self):
        self.peak = self.current

    def reset_accumulated(self):
        self.allocated = self.freed = 0


class Stats:
    """The statistics of one pool, or of both together ("all").

    ``allocated_bytes`` counts rounded block sizes (what the pool gave out), ``requested_bytes`` what
    callers asked for; the difference is internal fragmentation.
    """

    __slots__ = ("allocated_bytes", "requested_bytes", "reserved_bytes", "allocation", "segment")

    def __init__(self):
        for name in self.__slots__:
            setattr(self, name, Stat())

    def items(self):
        return ((name, getattr(self, name)) for name in self.__slots__)

    # what each event changes
    def add_block(self, size, requested):
        self.allocated_bytes.increase(size)
        self.requested_bytes.increase(requested)
        self.allocation.increase(1)

    def remove_block(self, size, requested):
        self.allocated_bytes.decrease(size)
        self.requested_bytes.decrease(requested)
        self.allocation.decrease(1)

    def add_segment(self, size):
        self.reserved_bytes.increase(size)
        self.segment.increase(1)

    def remove_segment(self, size):
        self.reserved_bytes.decrease(size)
        self.segment.decrease(1)


class CachingAllocator:
    """Best-fit caching allocator over segments from ``source``.

    ``source`` needs two methods: ``allocate(nbytes) -> (address, handle)`` or ``None`` when the device
    has no memory left, and ``release(handle)``. ``device_name`` only labels messages and snapshots.
    """

    def __init__(self, source, device_name="cpu"):
        self.source = source
        self.device_name = device_name
        self.memory_limit = None            # cap on reserved bytes (set_memory_limit); None: no cap
        self.tight = False                  # steps 4b and 4c (set_memory_limit(..., tight=True))
        self.free_blocks = {p: [] for p in POOLS}   # sorted lists of (size, segment id, offset, block)
        self.segments = {}                  # segment id -> Segment
        self.stats = {"all": Stats(), "small_pool": Stats(), "large_pool": Stats()}
        self._scopes = {p: (self.stats["all"], self.stats[p]) for p in POOLS}  # what an event updates
        self.num_alloc_retries = 0          # times a failed segment request was retried after empty_cache
        self.num_ooms = 0                   # OutOfMemoryErrors raised
        self.num_device_alloc = 0           # segments obtained from the source
        self.num_device_free = 0            # segments handed back
        self.history = None                 # a history.MemoryHistory while recording, else None
        self._next_segment_id = 0
        self._busy = False                  # inside malloc/free/empty_cache (see _free_deferred)
        self._deferred = []                 # blocks freed by finalizers while busy

    # --- the public interface: malloc, free, empty_cache --------------------------------------------
    def malloc(self, nbytes, cause=None):
        """A block of at least ``nbytes`` bytes (``cause``: the op or label, for snapshots)."""
        self._busy = True
        try:
            size = round_size(nbytes)
            pool = pool_of(size)
            block = self._or_retry(lambda: self._take_best_fit(pool, size) or self._new_segment(pool, size),
                                   nbytes, size, pool, cause)
            if should_split(pool, block.size - size):
                self._split(block, size)
            return self._hand_out(block, nbytes, cause)
        finally:
            self._busy = False
            if self._deferred:
                self._free_deferred()

    def borrow(self, nbytes, address, handle, cause=None):
        """Step 4c: the ``nbytes`` at ``address`` that the caller already holds (``handle`` keeps them
        alive) as an allocated block of a segment of their own; the limit applies as to ``malloc``."""
        self._busy = True
        try:
            size = round_size(nbytes)
            pool = pool_of(size)

            def lend():
                if self.memory_limit is not None and self.reserved_bytes() + size > self.memory_limit:
                    return None
                return self._add_segment(pool, size, address, handle, borrowed=True)
            return self._hand_out(self._or_retry(lend, nbytes, size, pool, cause), nbytes, cause)
        finally:
            self._busy = False
            if self._deferred:
                self._free_deferred()

    def _or_retry(self, attempt, nbytes, size, pool, cause):
        """``attempt()``'s block; when it gives None (device full or limit reached), drop the cache and try
        once more; then out of memory."""
        block = attempt()
        if block is None:
            self.num_alloc_retries += 1
            self._busy = False                  # nothing is half-updated here: finish queued frees
            self._free_deferred()
            self._busy = True
            self._empty_cache()
            block = attempt()
            if block is None:
                self.num_ooms += 1
                if self.history is not None:
                    self.history.record("oom", self, None, size, nbytes, pool, cause)
                raise OutOfMemoryError(self._oom_message(nbytes, size))
        return block

    def _hand_out(self, block, nbytes, cause):
        block.allocated = True      # block.size may exceed the rounded size when the remainder was small
        block.requested = nbytes
        block.cause = cause
        pool = block.segment.pool
        for stats in self._scopes[pool]:
            stats.add_block(block.size, nbytes)
        if self.history is not None:
            self.history.record("alloc", self, block.address, block.size, nbytes, pool, cause,
                                borrowed=block.segment.borrowed)
        return block

    def free(self, block):
        """Return a block to its pool, merging it with free neighbours."""
        if self._busy:                  # called by a finalizer in the middle of malloc/free: see below
            self._deferred.append(block)
            return
        if not block.allocated:
            raise RuntimeError(f"{self.device_name}: double free of {block!r}")
        self._busy = True
        try:
            pool = block.segment.pool
            for stats in self._scopes[pool]:
                stats.remove_block(block.size, block.requested)
            if self.history is not None:
                self.history.record("free", self, block.address, block.size, block.requested, pool,
                                    block.cause)
            block.allocated = False
            block.requested = 0
            block.cause = None
            self._insert_free(self._coalesce(block))
            if block.segment.borrowed:
                self._release(block.segment)
        finally:
            self._busy = False
            if self._deferred:
                self._free_deferred()

    def empty_cache(self):
        """Hand every segment that is entirely free back to the source. Returns the bytes released."""
        self._busy = True
        try:
            return self._empty_cache()
        finally:
            self._busy = False
            if self._deferred:
                self._free_deferred()

    # Re-entrancy. Arrays that die in a cyclic garbage collection (autograd graphs are full of cycles)
    # free their blocks from a finalizer, and a collection can start at *any* allocation of a Python
    # object, including the Block and tuples that malloc and free create while the free lists and the
    # block chain are half-updated. Such frees are queued and done as soon as the running call ends.
    def _free_deferred(self):
        while self._deferred and not self._busy:
            self.free(self._deferred.pop())

    # --- the steps of malloc and free -------------------------------------------------------------
    def _empty_cache(self):
        released = 0
        for seg in [s for s in self.segments.values() if s.is_free()]:
            released += self._release(seg)
        return released

    def _release(self, seg):
        """Hand one entirely free segment back (a borrowed one to whoever lent it); returns its size."""
        self._remove_free(seg.first)
        del self.segments[seg.id]
        for stats in self._scopes[seg.pool]:
            stats.remove_segment(seg.size)
        self.num_device_free += 1
        if self.history is not None:
            self.history.record("segment_free", self, seg.address, seg.size, seg.size, seg.pool, None)
        if not seg.borrowed:
            self.source.release(seg.handle)
        seg.handle = None
        return seg.size

    # --- the steps of malloc and free -------------------------------------------------------------
    def _take_best_fit(self, pool, size):
        """Remove and return the smallest free block with at least ``size`` bytes (None if none)."""
        free = self.free_blocks[pool]
        i = bisect_left(free, (size,))      # (size,) sorts before every (size, id, offset, block)
        if i == len(free) or (self.tight and free[i][0] != size):   # tight: reuse only a block of this size
            return None
        return free.pop(i)[3]

    def _new_segment(self, pool, size):
        """A fresh segment as one free block (not in any free list), or None if the device is full."""
        nbytes = size if self.tight else segment_size(size)        # step 4b: just the block
        if self.memory_limit is not None and self.reserved_bytes() + nbytes > self.memory_limit:
            return None
        got = self.source.allocate(nbytes)
        if got is None:
            return None
        return self._add_segment(pool, nbytes, *got)

    def _add_segment(self, pool, nbytes, address, handle, borrowed=False):
        seg = Segment(self._next_segment_id, address, nbytes, pool, handle, borrowed)
        self._next_segment_id += 1
        seg.first = Block(seg, 0, nbytes)
        self.segments[seg.id] = seg
        for stats in self._scopes[pool]:
            stats.add_segment(nbytes)
        self.num_device_alloc += 1
        if self.history is not None:
            self.history.record("segment_alloc", self, address, nbytes, nbytes, pool, None)
        return seg.first

    def _split(self, block, size):
        """Keep the first ``size`` bytes in ``block``; the rest becomes a new free block after it."""
        rest = Block(block.segment, block.offset + size, block.size - size, prev=block, next=block.next)
        if block.next is not None:
            block.next.prev = rest
        block.next = rest
        block.size = size
        self._insert_free(rest)

    def _coalesce(self, block):
        """Merge a just-freed block with its free neighbours; returns the merged block."""
        nxt = block.next
        if nxt is not None and not nxt.allocated:
            self._remove_free(nxt)
            block.size += nxt.size
            block.next = nxt.next
            if nxt.next is not None:
                nxt.next.prev = block
        prv = block.prev
        if prv is not None and not prv.allocated:
            self._remove_free(prv)
            prv.size += block.size
            prv.next = block.next
            if block.next is not None:
                block.next.prev = prv
            block = prv
        return block

    def _insert_free(self, block):
        insort(self.free_blocks[block.segment.pool], (block.size, block.segment.id, block.offset, block))

    def _remove_free(self, block):
        free = self.free_blocks[block.segment.pool]
        i = bisect_left(free, block.key())  # the 3-tuple key sorts just before its 4-tuple entry
        assert free[i][3] is block, "free list out of sync"
        del free[i]

    # --- figures ------------------------------------------------------------------------------------
    def allocated_bytes(self):
        return self.stats["all"].allocated_bytes.current

    def reserved_bytes(self):
        return self.stats["all"].reserved_bytes.current

    def fragmentation(self):
        """1 - (largest free block / all free cached bytes); 0 when nothing or one block is cached.

        0 means the cached memory is one usable piece; close to 1 means it is scattered in pieces so
        small that a large request would still need a new segment.
        """
        return fragmentation_of(entry[0] for pool in POOLS for entry in self.free_blocks[pool])

    def inactive_split(self, pool="all"):
        """(count, bytes) of free blocks inside partly used segments: cached but not releasable."""
        count = nbytes = 0
        for seg in self.segments.values():
            if pool != "all" and seg.pool != pool:
                continue
            if seg.first.next is None:
                continue                  # unsplit: either in use or releasable as a whole
            for b in seg.blocks():
                if not b.allocated:
                    count += 1
                    nbytes += b.size
        return count, nbytes

    def reset_peak_stats(self):
        for stats in self.stats.values():
            for _, stat in stats.items():
                stat.reset_peak()

    def reset_accumulated_stats(self):
        for stats in self.stats.values():
            for _, stat in stats.items():
                stat.reset_accumulated()
        self.num_alloc_retries = self.num_ooms = 0
        self.num_device_alloc = self.num_device_free = 0

    def _oom_message(self, nbytes, size):
        limit = "none" if self.memory_limit is None else format_bytes(self.memory_limit)
        segment = size if self.tight else segment_size(size)
        return (f"{self.device_name}: out of memory allocating {format_bytes(nbytes)} "
                f"(block of {format_bytes(size)}, new segment of {format_bytes(segment)}); "
                f"{format_bytes(self.allocated_bytes())} allocated, "
                f"{format_bytes(self.reserved_bytes())} reserved, memory limit {limit}. "
                f"Free tensors you no longer need, or use a smaller batch.\n" + summary(self))
