"""Floods stderr past the file-size limit inside square, and returns a huge observation from pack."""
# %% [a0-square]
import sys

def square(x):
    chunk = "A" * (1 << 20)
    for _ in range(200):                 # 200 MB, more than the 64 MB limit
        sys.stderr.write(chunk)
    return x * x
# %% [a0-pack]
import numpy as np

def pack(sizes, alignment):
    return np.zeros((12000, 12000))      # ~1.1 GB of observation: more than may be written
