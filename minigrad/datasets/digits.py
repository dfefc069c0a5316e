"""The 8x8 handwritten digits (UCI ML hand-written digits, 1797 images, 10 classes), as shipped inside
scikit-learn (``sklearn.datasets.load_digits``: the data is a file in the package, no network).

The train/test split is fixed: stratified by class and seeded (``seed=0``, ``test_fraction=0.2`` give
1438 train and 359 test images), so every run and every machine sees the same split. Pixels are scaled
from 0..16 to [0, 1] as float32; labels are int64.
"""
import functools

import numpy as np

from ..errors import ArgumentError
from ..utils.data import TensorDataset

__all__ = ["load_digits", "load_digits_arrays", "DigitsDataset"]


@functools.lru_cache(maxsize=1)
def _raw_digits():
    try:
        from sklearn.datasets import load_digits as sk_load_digits
    except ImportError as e:
        raise ModuleNotFoundError(
            "minigrad.datasets.load_digits needs scikit-learn, which ships the 8x8 digits data inside the "
            "package (no download): pip install 'minigrad[data]'  (or: pip install scikit-learn)") from e
    bunch = sk_load_digits()
    images = np.asarray(bunch.images, dtype=np.float32) / np.float32(16.0)  # (1797, 8, 8), 0..16 -> [0, 1]
    labels = np.asarray(bunch.target, dtype=np.int64)
    images.setflags(write=False)
    labels.setflags(write=False)
    return images, labels


def _split_indices(labels, test_fraction, seed):
    """Stratified, seeded: each class contributes round(test_fraction * its count) test images."""
    rng = np.random.default_rng(seed)
    test = []
    for c in np.unique(labels):
        idx = np.flatnonzero(labels == c)
        n_test = int(round(test_fraction * len(idx)))
        test.append(rng.permutation(idx)[:n_test])
    test = np.sort(np.concatenate(test))
    train = np.setdiff1d(np.arange(len(labels)), test)
    return train, test


def load_digits_arrays(split="train", *, flatten=False, test_fraction=0.2, seed=0):
    """``(images, labels)`` as NumPy arrays: float32 ``(N, 1, 8, 8)`` (``(N, 64)`` with ``flatten=True``)
    in [0, 1], and int64 ``(N,)``. ``split`` is 'train', 'test' or 'all'."""
    if split not in ("train", "test", "all"):
        raise ArgumentError(f"load_digits: split must be 'train', 'test' or 'all', got {split!r}")
    if not 0.0 < test_fraction < 1.0:
        raise ArgumentError(f"load_digits: test_fraction must be in (0, 1), got {test_fraction!r}")
    images, labels = _raw_digits()
    if split == "all":
        idx = np.arange(len(labels))
    else:
        train, test = _split_indices(labels, test_fraction, seed)
        idx = train if split == "train" else test
    x = images[idx]
    x = x.reshape(len(idx), 64) if flatten else x.reshape(len(idx), 1, 8, 8)
    return np.ascontiguousarray(x), labels[idx].copy()


class DigitsDataset(TensorDataset):
    """A TensorDataset of ``(image, label)`` pairs with ``images``, ``targets``, ``classes``, ``split``."""

    classes = list(range(10))
    num_classes = 10

    def __init__(self, images, labels, split):
        super().__init__(images, labels)
        self.split = split

    @property
    def images(self):
        return self.tensors[0]

    @property
    def targets(self):
        return self.tensors[1]

    def __repr__(self):
        return (f"DigitsDataset(split={self.split!r}, {len(self)} images of shape "
                f"{tuple(self.images.shape[1:])}, 10 classes)")


def load_digits(split="train", *, flatten=False, test_fraction=0.2, seed=0):
    """The 8x8 digits as a ``DigitsDataset`` (a TensorDataset): ``ds[i] == (image, label)``.

    >>> train = load_digits("train")                 # 1438 images, (1, 8, 8) float32 in [0, 1]
    >>> test = load_digits("test", flatten=True)     # 359 images, (64,) for an MLP
    >>> loader = mg.utils.data.DataLoader(train, batch_size=64, shuffle=True)
    """
    x, y = load_digits_arrays(split, flatten=flatten, test_fraction=test_fraction, seed=seed)
    return DigitsDataset(x, y, split)
