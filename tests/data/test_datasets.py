"""minigrad.datasets: the scikit-learn digits and the committed character corpus."""
import builtins
import sys

import numpy as np
import pytest

import minigrad as mg
from minigrad.datasets import (CharCorpus, CharWindowDataset, available_corpora, corpus_text, load_digits,
                               load_digits_arrays, load_text_corpus)
from minigrad.errors import ArgumentError
from minigrad.utils.data import DataLoader, TensorDataset, default_collate

try:
    import sklearn  # noqa: F401
    HAVE_SKLEARN = True
except ImportError:
    HAVE_SKLEARN = False
needs_sklearn = pytest.mark.skipif(not HAVE_SKLEARN, reason="the digits live inside scikit-learn (extra 'data')")


# --- digits ---------------------------------------------------------------------------------------------
@needs_sklearn
def test_digits_split_sizes_shapes_dtypes_and_range():
    train, test = load_digits("train"), load_digits("test")
    assert isinstance(train, TensorDataset)
    assert len(train) + len(test) == 1797 and len(test) == 359
    assert train.images.shape == (len(train), 1, 8, 8) and train.images.dtype == mg.float32
    assert train.targets.dtype == mg.int64
    x = train.images.numpy()
    assert x.min() == 0.0 and x.max() == 1.0
    img, label = train[0]
    assert img.shape == (1, 8, 8) and 0 <= label.item() <= 9


@needs_sklearn
def test_digits_flatten_for_mlps():
    x, y = load_digits_arrays("test", flatten=True)
    assert x.shape == (359, 64) and y.shape == (359,)
    x4, _ = load_digits_arrays("test")
    np.testing.assert_array_equal(x4.reshape(359, 64), x)


@needs_sklearn
def test_digits_split_is_fixed_disjoint_and_stratified():
    from minigrad.datasets.digits import _split_indices

    _, ya = load_digits_arrays("all")
    train, test = _split_indices(ya, 0.2, 0)
    assert len(np.intersect1d(train, test)) == 0 and len(train) + len(test) == 1797
    train2, test2 = _split_indices(ya, 0.2, 0)
    np.testing.assert_array_equal(test, test2)
    assert not np.array_equal(_split_indices(ya, 0.2, 1)[1], test)  # the seed chooses the split
    xtr, ytr = load_digits_arrays("train", flatten=True)
    np.testing.assert_array_equal(xtr, load_digits_arrays("train", flatten=True)[0])
    np.testing.assert_array_equal(ytr, ya[train])
    counts = np.bincount(ya[test], minlength=10)
    assert counts.min() >= 35 and counts.max() <= 37  # about 20 % of each class
    assert len(load_digits_arrays("test", test_fraction=0.5)[1]) > 890


@needs_sklearn
def test_digits_matches_sklearn_values():
    from sklearn.datasets import load_digits as sk

    bunch = sk()
    x, y = load_digits_arrays("all")
    np.testing.assert_allclose(x.reshape(-1, 8, 8), bunch.images / 16.0, rtol=0, atol=1e-7)
    np.testing.assert_array_equal(y, bunch.target)


@needs_sklearn
def test_digits_bad_split():
    with pytest.raises(ArgumentError, match="split"):
        load_digits("validation")


def test_digits_missing_sklearn_gives_clear_error(monkeypatch):
    from minigrad.datasets import digits

    digits._raw_digits.cache_clear()
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name.startswith("sklearn"):
            raise ImportError("No module named 'sklearn'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    for mod in [m for m in sys.modules if m.startswith("sklearn")]:
        monkeypatch.delitem(sys.modules, mod)
    try:
        with pytest.raises(ModuleNotFoundError, match=r"scikit-learn.*minigrad\[data\]"):
            load_digits("train")
    finally:
        monkeypatch.undo()
        digits._raw_digits.cache_clear()


@needs_sklearn
def test_digits_through_a_dataloader():
    loader = DataLoader(load_digits("train"), batch_size=64, shuffle=True, generator=mg.Generator().manual_seed(0))
    xb, yb = next(iter(loader))
    assert xb.shape == (64, 1, 8, 8) and yb.shape == (64,) and yb.dtype == mg.int64


# --- text corpus ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def corpus():
    return load_text_corpus()


def test_corpus_is_committed_and_sizeable(corpus):
    assert "devils_dictionary" in available_corpora()
    text = corpus_text()
    assert 300_000 < len(text) < 600_000
    assert "THE DEVIL'S DICTIONARY" in text and "AMBROSE BIERCE" in text
    assert text.isascii()
    assert corpus.text == text


def test_corpus_vocabulary_encode_decode(corpus):
    assert corpus.chars == sorted(set(corpus.text)) and corpus.vocab_size == len(corpus.chars)
    assert 60 <= corpus.vocab_size <= 100
    ids = corpus.encode("CYNIC, n.  A blackguard")
    assert ids.dtype == np.int64 and corpus.decode(ids) == "CYNIC, n.  A blackguard"
    assert corpus.decode(mg.tensor(ids)) == "CYNIC, n.  A blackguard"
    assert corpus.decode(list(ids)) == "CYNIC, n.  A blackguard"
    assert [corpus.itos[i] for i in corpus.encode("ab")] == ["a", "b"]
    assert corpus.stoi["a"] == corpus.encode("a")[0]
    np.testing.assert_array_equal(corpus.data, corpus.encode(corpus.text))
    with pytest.raises(ArgumentError, match="not in the vocabulary"):
        corpus.encode("naïve")
    with pytest.raises(ArgumentError):
        corpus.decode([corpus.vocab_size])


def test_corpus_train_val_split(corpus):
    n = len(corpus.data)
    assert len(corpus.train_data) + len(corpus.val_data) == n
    assert abs(len(corpus.val_data) - 0.1 * n) <= 1
    np.testing.assert_array_equal(np.concatenate([corpus.train_data, corpus.val_data]), corpus.data)


def test_window_dataset_targets_are_shifted_inputs(corpus):
    ds = corpus.dataset("train", block_size=32)
    assert len(ds) == len(corpus.train_data) - 32
    x, y = ds[100]
    assert x.shape == (32,) and y.shape == (32,) and x.dtype == mg.int64
    np.testing.assert_array_equal(x.numpy()[1:], y.numpy()[:-1])
    assert corpus.decode(x) == corpus.text[100:132]
    last_x, last_y = ds[-1]
    assert corpus.decode(last_y)[-1] == corpus.decode(corpus.train_data[-1:])
    with pytest.raises(IndexError):
        ds[len(ds)]


def test_window_dataset_fast_path_matches_samples(corpus):
    ds = corpus.dataset("val", block_size=16, stride=3)
    idx = [0, 5, len(ds) - 1, 7]
    fast = ds._fetch_batch(idx)
    slow = default_collate([ds[i] for i in idx])
    np.testing.assert_array_equal(fast[0].array, slow[0].numpy())
    np.testing.assert_array_equal(fast[1].array, slow[1].numpy())
    xb, yb = next(iter(DataLoader(ds, batch_size=8, shuffle=True, generator=mg.Generator().manual_seed(0))))
    assert xb.shape == (8, 16) and yb.shape == (8, 16)


def test_get_batch_is_seeded(corpus):
    x1, y1 = corpus.get_batch("train", 4, 8, generator=mg.Generator().manual_seed(3))
    x2, _ = corpus.get_batch("train", 4, 8, generator=mg.Generator().manual_seed(3))
    assert x1.shape == (4, 8) and x1.tolist() == x2.tolist()
    np.testing.assert_array_equal(x1.numpy()[:, 1:], y1.numpy()[:, :-1])


def test_char_corpus_from_text_and_path(tmp_path):
    c = CharCorpus("hello world, hello corpus", val_fraction=0.2)
    assert c.vocab_size == len(set("hello world, hello corpus")) and len(c.val_data) == 5
    p = tmp_path / "t.txt"
    p.write_text("abcabcabc", encoding="utf-8")
    c = load_text_corpus(path=p, val_fraction=0.0)
    assert c.chars == ["a", "b", "c"] and len(c.val_data) == 0
    with pytest.raises(ArgumentError):
        CharWindowDataset(c.data, block_size=9)
    with pytest.raises(ArgumentError, match="unknown corpus"):
        load_text_corpus("shakespeare")
