"""Samplers: the order in which DataLoader visits a map-style dataset.

A sampler is an iterable of indices (``BatchSampler``: of lists of indices). Random samplers draw from an
``mg.Generator`` when one is given (``generator.np`` is its NumPy ``Generator``), so the same seed gives
the same order; without one they draw from minigrad's global generator (seeded by ``mg.manual_seed``).
"""
import numpy as np

from ...errors import ArgumentError
from ...random import default_generator
from ...tensor import Tensor

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler",
           "BatchSampler"]


def _np_rng(generator=None):
    """The ``numpy.random.Generator`` to draw from: the given ``mg.Generator``'s, a NumPy Generator as is,
    or minigrad's global generator's."""
    if generator is None:
        generator = default_generator    # what ``mg.manual_seed`` seeds
    if isinstance(generator, np.random.Generator):
        return generator
    rng = getattr(generator, "np", None)
    if isinstance(rng, np.random.Generator):
        return rng
    raise ArgumentError(f"generator must be an mg.Generator (or a numpy.random.Generator), "
                        f"got {type(generator).__name__}")


def _draw_seed(generator=None):
    """A fresh 62-bit seed from ``generator`` (used for the per-worker seeds of one epoch)."""
    return int(_np_rng(generator).integers(0, 2**62))


class Sampler:
    """Base class: an iterable of indices, usually with a ``__len__``."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


_CHUNK = 32   # indices drawn at a time with replacement (PyTorch's chunk)


class RandomSampler(Sampler):
    """A random permutation (``replacement=False``) or ``num_samples`` draws with replacement."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source = data_source
        self.replacement = bool(replacement)
        self._num_samples = num_samples
        self.generator = generator
        if num_samples is not None and (not isinstance(num_samples, int) or num_samples <= 0):
            raise ArgumentError(f"RandomSampler: num_samples should be a positive integer, got {num_samples!r}")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        if n == 0:
            return
        rng = _np_rng(self.generator)
        # Drawn lazily, as PyTorch does: with replacement 32 indices at a time, without it one permutation
        # at a time, so num_samples=10**10 (an "endless" loader) costs nothing up front.
        if self.replacement:
            for start in range(0, self.num_samples, _CHUNK):
                yield from rng.integers(0, n, size=min(_CHUNK, self.num_samples - start)).tolist()
            return
        for _ in range(self.num_samples // n):
            yield from rng.permutation(n).tolist()
        if self.num_samples % n:
            yield from rng.permutation(n)[: self.num_samples % n].tolist()

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order."""

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        for i in _np_rng(self.generator).permutation(len(self.indices)).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices drawn with probabilities proportional to ``weights``."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        if isinstance(weights, Tensor):
            weights = weights.numpy()
        w = np.asarray(weights, dtype=np.float64)
        if w.ndim != 1 or np.any(w < 0) or not np.all(np.isfinite(w)) or w.sum() <= 0:
            raise ArgumentError("WeightedRandomSampler: weights must be a 1-D sequence of non-negative, finite "
                                "numbers with a positive sum")
        if not isinstance(num_samples, int) or num_samples <= 0:
            raise ArgumentError(f"WeightedRandomSampler: num_samples should be a positive integer, "
                                f"got {num_samples!r}")
        if not replacement and num_samples > np.count_nonzero(w):
            raise ArgumentError("WeightedRandomSampler: without replacement, num_samples cannot exceed the "
                                "number of non-zero weights")
        self.weights = w
        self.num_samples = num_samples
        self.replacement = bool(replacement)
        self.generator = generator

    def __iter__(self):
        rng = _np_rng(self.generator)
        p = self.weights / self.weights.sum()
        yield from rng.choice(len(p), size=self.num_samples, replace=self.replacement, p=p).tolist()

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Groups the indices of ``sampler`` into lists of ``batch_size`` (the last one shorter unless
    ``drop_last``)."""

    def __init__(self, sampler, batch_size, drop_last=False):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ArgumentError(f"BatchSampler: batch_size should be a positive integer, got {batch_size!r}")
        if not isinstance(drop_last, bool):
            raise ArgumentError(f"BatchSampler: drop_last should be a bool, got {drop_last!r}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else (n + self.batch_size - 1) // self.batch_size
