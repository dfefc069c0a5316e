"""A character-level text corpus for a tiny GPT.

The corpus committed under ``minigrad/datasets/data/`` is Ambrose Bierce's *The Devil's Dictionary*
(public domain, about 380 KB of English; see ``data/README.md`` for its source). ``load_text_corpus()``
returns a ``CharCorpus``: the vocabulary (every distinct character, sorted), ``encode``/``decode``, the
encoded text split into a training part and a validation part (the last ``val_fraction`` of the text, so
the two never share a window), and datasets of ``(x, y)`` windows where ``y`` is ``x`` shifted by one
character: the next-character targets.
"""
import importlib.resources
import os

import numpy as np

from ..errors import ArgumentError
from ..tensor import Tensor, tensor
from ..utils.data import Dataset
from ..utils.data.collate import TensorData
from ..utils.data.sampler import _np_rng

__all__ = ["CharCorpus", "CharWindowDataset", "load_text_corpus", "corpus_text", "available_corpora"]

_CORPORA = {"devils_dictionary": "devils_dictionary.txt"}


def available_corpora():
    """Names accepted by ``load_text_corpus``."""
    return sorted(_CORPORA)


def corpus_text(name="devils_dictionary"):
    """The raw text of a committed corpus."""
    if name not in _CORPORA:
        raise ArgumentError(f"load_text_corpus: unknown corpus {name!r} "
                            f"(available: {', '.join(available_corpora())})")
    return (importlib.resources.files(__package__) / "data" / _CORPORA[name]).read_text(encoding="utf-8")


class CharWindowDataset(Dataset):
    """Windows of ``block_size`` characters: ``ds[i] == (x, y)`` with ``x = data[s:s+block_size]`` and
    ``y = data[s+1:s+block_size+1]`` (int64), ``s = i * stride``."""

    def __init__(self, data, block_size, stride=1):
        data = np.asarray(data, dtype=np.int64)
        if data.ndim != 1:
            raise ArgumentError(f"CharWindowDataset: data must be 1-D, got shape {data.shape}")
        if not isinstance(block_size, int) or block_size <= 0:
            raise ArgumentError(f"CharWindowDataset: block_size must be a positive integer, got {block_size!r}")
        if not isinstance(stride, int) or stride <= 0:
            raise ArgumentError(f"CharWindowDataset: stride must be a positive integer, got {stride!r}")
        if len(data) < block_size + 1:
            raise ArgumentError(f"CharWindowDataset: {len(data)} characters are too few for one window of "
                                f"block_size={block_size} (need {block_size + 1})")
        self.data = data
        self.block_size = block_size
        self.stride = stride
        self._offsets = np.arange(block_size)

    def __len__(self):
        return (len(self.data) - self.block_size - 1) // self.stride + 1

    def _start(self, i):
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"CharWindowDataset: index {i} out of range for {n} windows")
        return (i % n) * self.stride

    def __getitem__(self, i):
        s = self._start(int(i))
        return tensor(self.data[s:s + self.block_size]), tensor(self.data[s + 1:s + self.block_size + 1])

    def _fetch_batch(self, indices):
        if type(self).__getitem__ is not CharWindowDataset.__getitem__:
            return NotImplemented
        idx = np.asarray(indices, dtype=np.int64)
        n = len(self)
        if idx.size and (idx.min() < -n or idx.max() >= n):
            raise IndexError(f"CharWindowDataset: index out of range for {n} windows")
        rows = ((idx % n) * self.stride)[:, None] + self._offsets
        return [TensorData(self.data[rows]), TensorData(self.data[rows + 1])]

    def __repr__(self):
        return f"CharWindowDataset({len(self)} windows of {self.block_size} characters)"


class CharCorpus:
    """A text with its character vocabulary, encoded as int64 ids and split into train and val parts.

    Attributes: ``text``, ``chars`` (sorted vocabulary), ``vocab_size``, ``stoi``, ``itos``, ``data``
    (the whole text encoded), ``train_data``, ``val_data`` (NumPy int64 arrays).
    """

    def __init__(self, text, *, val_fraction=0.1, name=None):
        if not isinstance(text, str) or len(text) < 2:
            raise ArgumentError("CharCorpus: text must be a string of at least 2 characters")
        if not 0.0 <= val_fraction < 1.0:
            raise ArgumentError(f"CharCorpus: val_fraction must be in [0, 1), got {val_fraction!r}")
        self.name = name
        self.text = text
        self.chars = sorted(set(text))
        self.vocab_size = len(self.chars)
        self.stoi = {c: i for i, c in enumerate(self.chars)}
        self.itos = list(self.chars)
        self._codepoints = np.array([ord(c) for c in self.chars], dtype=np.int64)
        self.data = self.encode(text)
        n_val = int(round(len(self.data) * val_fraction))
        self.val_fraction = val_fraction
        self.train_data = self.data[:len(self.data) - n_val]
        self.val_data = self.data[len(self.data) - n_val:]

    def __len__(self):
        return len(self.text)

    def __repr__(self):
        label = f"{self.name!r}, " if self.name else ""
        return (f"CharCorpus({label}{len(self.text)} characters, vocab_size={self.vocab_size}, "
                f"train={len(self.train_data)}, val={len(self.val_data)})")

    def encode(self, s):
        """The ids of the characters of ``s`` (int64 NumPy array)."""
        codes = np.frombuffer(s.encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
        ids = np.searchsorted(self._codepoints, codes)
        ids_clipped = np.minimum(ids, self.vocab_size - 1)
        bad = self._codepoints[ids_clipped] != codes
        if bad.any():
            unknown = sorted({chr(c) for c in codes[bad]})
            raise ArgumentError(f"CharCorpus.encode: characters not in the vocabulary: {unknown!r}")
        return ids

    def decode(self, ids):
        """The text for a sequence of ids (list, NumPy array or minigrad tensor)."""
        if isinstance(ids, Tensor):
            ids = ids.tolist()
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):
            raise ArgumentError(f"CharCorpus.decode: ids must be in [0, {self.vocab_size}), "
                                f"got min {ids.min()} and max {ids.max()}")
        return "".join(self.itos[i] for i in ids.tolist())

    def split_data(self, split):
        if split == "train":
            return self.train_data
        if split == "val":
            return self.val_data
        raise ArgumentError(f"CharCorpus: split must be 'train' or 'val', got {split!r}")

    def dataset(self, split="train", block_size=64, stride=1):
        """A ``CharWindowDataset`` over one split (use it with a DataLoader)."""
        return CharWindowDataset(self.split_data(split), block_size, stride)

    def get_batch(self, split, batch_size, block_size, generator=None):
        """``batch_size`` random windows as ``(x, y)`` int64 tensors of shape ``(batch_size, block_size)``
        (nanoGPT style; ``generator`` is an ``mg.Generator``)."""
        data = self.split_data(split)
        if len(data) < block_size + 1:
            raise ArgumentError(f"CharCorpus.get_batch: the {split} split has {len(data)} characters, too few "
                                f"for block_size={block_size}")
        starts = _np_rng(generator).integers(0, len(data) - block_size, size=batch_size)
        rows = starts[:, None] + np.arange(block_size)
        return tensor(data[rows]), tensor(data[rows + 1])


def load_text_corpus(name="devils_dictionary", *, path=None, val_fraction=0.1):
    """The committed character corpus (or the UTF-8 text file at ``path``) as a ``CharCorpus``.

    >>> corpus = load_text_corpus()
    >>> corpus.vocab_size, corpus.decode(corpus.encode("cynic")) == "cynic"
    >>> train = corpus.dataset("train", block_size=64)       # (x, y) windows for a DataLoader
    """
    if path is not None:
        with open(os.fspath(path), encoding="utf-8") as f:
            text = f.read()
        name = os.path.basename(os.fspath(path))
    else:
        text = corpus_text(name)
    return CharCorpus(text, val_fraction=val_fraction, name=name)
