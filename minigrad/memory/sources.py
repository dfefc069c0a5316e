"""Segment sources: where the caching allocator gets raw memory from.

A source is the allocator's only contact with a device, and it is deliberately tiny:

    allocate(nbytes) -> (address, handle), or None when the device has no memory left
    release(handle)  -> None

``handle`` is whatever keeps the memory alive (a NumPy arena, a cupy ``Memory``); the allocator stores it
in the segment and gives it back on release. The CuPy source lives in ``cupy_pool`` so that this module
never imports cupy.
"""
import numpy as np


ALIGN = 64   # bytes: a cache line, and what AVX-512 loads want (NumPy's own arrays are 16-byte aligned)


class CPUSource:
    """Real host memory: every segment is a fresh ``numpy.empty(nbytes + ALIGN, uint8)`` arena, its
    address rounded up to ``ALIGN`` (blocks are multiples of 512 bytes, so every block is aligned too).

    NumPy reports these allocations to ``tracemalloc``, so on CPU the pool's reserved bytes can be
    checked against an independent count. Releasing a segment drops the arena; NumPy frees it once no
    array views it any more.
    """

    def __init__(self, capacity=None):
        self.capacity = capacity    # optional cap on bytes handed out, like a device's total memory
        self.in_use = 0

    def allocate(self, nbytes):
        if self.capacity is not None and self.in_use + nbytes > self.capacity:
            return None
        try:
            arena = np.empty(nbytes + ALIGN, dtype=np.uint8)
        except MemoryError:
            return None
        self.in_use += nbytes
        address = arena.__array_interface__["data"][0]
        return address + (-address) % ALIGN, arena

    def release(self, handle):
        self.in_use -= handle.nbytes - ALIGN


class SimulatedSource:
    """Addresses without memory: for lectures and tests that simulate an 80 GB GPU on a laptop.

    Hands out increasing, 512-aligned fake addresses (with a gap between segments, so two segments are
    never adjacent) and refuses once ``capacity`` bytes are out.
    """

    def __init__(self, capacity=None, base=1 << 32):
        self.capacity = capacity
        self.in_use = 0
        self.next_address = base

    def allocate(self, nbytes):
        if self.capacity is not None and self.in_use + nbytes > self.capacity:
            return None
        address = self.next_address
        self.next_address += nbytes + 4096
        self.in_use += nbytes
        return address, nbytes

    def release(self, handle):
        self.in_use -= handle
