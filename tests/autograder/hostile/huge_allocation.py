"""Allocations far past the memory limit: a MemoryError, not a dead machine."""
# %% [a0-square]
import numpy as np

def square(x):
    return np.ones((1 << 40,)) * 0 + x.sum()      # 8 TiB
# %% [a0-pack]
def pack(sizes, alignment):
    hog = []
    for _ in range(1000):                           # at most ~100 GB if unbounded: the limit stops it
        hog.append(np.empty(100 << 20, np.uint8))
    return [0] * len(sizes)
