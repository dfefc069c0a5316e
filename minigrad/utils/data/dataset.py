"""Datasets: the map-style ``Dataset`` protocol, ``IterableDataset``, and the usual building blocks.

A map-style dataset has ``__getitem__(i)`` and ``__len__()``. A dataset may also offer a batched fast path,
``_fetch_batch(indices)``, that returns the *collated* batch (with ``TensorData`` markers where tensors
belong, see ``collate.py``) for a list of indices, or ``NotImplemented`` to fall back to
``collate_fn([ds[i] for i in indices])``. DataLoader uses it only with the default ``collate_fn``; it turns
64 tiny tensor indexings plus a stack into one NumPy fancy-indexing per field. ``TensorDataset`` and
``Subset`` implement it (and switch it off in subclasses that override ``__getitem__``).
"""
import bisect
import math
import warnings

import numpy as np

from ...errors import ArgumentError, ShapeError
from ...tensor import Tensor, tensor
from .collate import TensorData
from .sampler import _np_rng

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "Subset", "ConcatDataset", "random_split"]


class Dataset:
    """Map-style dataset: subclasses implement ``__getitem__(index)`` and ``__len__()``."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """Stream-style dataset: subclasses implement ``__iter__``.

    With ``num_workers > 0`` every worker iterates its own copy; use ``get_worker_info()`` inside
    ``__iter__`` to give each worker its own share of the stream (otherwise the data is repeated).
    """

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")

    def __add__(self, other):
        return NotImplemented


def _as_tensor(x):
    return x if isinstance(x, Tensor) else tensor(x)


class TensorDataset(Dataset):
    """Samples are the rows of tensors that share their first dimension: ``ds[i] == (t0[i], t1[i], ...)``.

    NumPy arrays are accepted and converted with ``mg.tensor`` (keeping their dtype).
    """

    def __init__(self, *tensors):
        if not tensors:
            raise ArgumentError("TensorDataset: needs at least one tensor")
        tensors = tuple(_as_tensor(t) for t in tensors)
        for i, t in enumerate(tensors):
            if len(t.shape) == 0:
                raise ShapeError(f"TensorDataset: tensor {i} is 0-dimensional; every tensor needs a first "
                                 f"dimension indexing the samples")
        n = tensors[0].shape[0]
        for i, t in enumerate(tensors[1:], 1):
            if t.shape[0] != n:
                raise ShapeError(f"TensorDataset: size mismatch between tensors: tensor 0 has {n} rows and "
                                 f"tensor {i} has {t.shape[0]}")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]

    def _fetch_batch(self, indices):
        if type(self).__getitem__ is not TensorDataset.__getitem__:
            return NotImplemented  # a subclass that transforms samples must see every sample
        arrays = []
        for t in self.tensors:
            data = t.array
            if t.device.type != "cpu" or not isinstance(data, np.ndarray) or t.requires_grad:
                return NotImplemented
            arrays.append(data)
        idx = np.asarray(indices, dtype=np.intp)
        return [TensorData(a[idx]) for a in arrays]

    def __repr__(self):
        shapes = ", ".join(str(tuple(t.shape)) for t in self.tensors)
        return f"{type(self).__name__}({len(self)} samples; tensors {shapes})"


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices`` (in that order)."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __len__(self):
        return len(self.indices)

    def _fetch_batch(self, indices):
        inner = getattr(self.dataset, "_fetch_batch", None)
        if inner is None or type(self).__getitem__ is not Subset.__getitem__:
            return NotImplemented
        return inner([self.indices[i] for i in indices])

    def __repr__(self):
        return f"Subset({len(self)} of {type(self.dataset).__name__})"


class ConcatDataset(Dataset):
    """Several map-style datasets one after another."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ArgumentError("ConcatDataset: datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise ArgumentError("ConcatDataset: does not support IterableDataset")
        self.cumulative_sizes = []
        total = 0
        for d in self.datasets:
            total += len(d)
            self.cumulative_sizes.append(total)

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise IndexError(f"ConcatDataset: index {idx} out of range for length {len(self)}")
            idx += len(self)
        d = bisect.bisect_right(self.cumulative_sizes, idx)
        if d >= len(self.datasets):
            raise IndexError(f"ConcatDataset: index {idx} out of range for length {len(self)}")
        start = 0 if d == 0 else self.cumulative_sizes[d - 1]
        return self.datasets[d][idx - start]


def random_split(dataset, lengths, generator=None):
    """Split ``dataset`` into non-overlapping random ``Subset``s.

    ``lengths`` are either sample counts that add up to ``len(dataset)``, or fractions that add up to 1
    (each gets ``floor(frac * n)`` samples; the remainder is dealt out one by one from the first split).
    ``generator`` (an ``mg.Generator``) makes the split reproducible.
    """
    n = len(dataset)
    lengths = list(lengths)
    if not lengths:
        raise ArgumentError("random_split: lengths must not be empty")
    if any(x < 0 for x in lengths):
        raise ArgumentError(f"random_split: lengths must be non-negative, got {lengths}")
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1 and sum(lengths) != n:
        counts = [int(math.floor(n * frac)) for frac in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        for i, c in enumerate(counts):
            if c == 0:
                warnings.warn(f"random_split: split {i} (fraction {lengths[i]}) is empty", stacklevel=2)
        lengths = counts
    elif any(int(x) != x for x in lengths):
        raise ArgumentError(f"random_split: lengths must be integers or fractions summing to 1, got {lengths}")
    lengths = [int(x) for x in lengths]
    if sum(lengths) != n:
        raise ArgumentError(f"random_split: sum of input lengths ({sum(lengths)}) does not equal the length "
                            f"of the input dataset ({n})")
    perm = _np_rng(generator).permutation(n).tolist()
    out, offset = [], 0
    for length in lengths:
        out.append(Subset(dataset, perm[offset:offset + length]))
        offset += length
    return out
