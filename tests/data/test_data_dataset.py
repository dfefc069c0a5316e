"""Datasets, samplers, random_split and collation (no worker processes here)."""
import collections

import numpy as np
import pytest

import minigrad as mg
from minigrad.errors import ArgumentError, DTypeError, ShapeError
from minigrad.utils.data import (BatchSampler, ConcatDataset, Dataset, RandomSampler, SequentialSampler, Subset,
                                 SubsetRandomSampler, TensorDataset, WeightedRandomSampler, default_collate,
                                 default_convert, random_split)


def _xy(n=10):
    return np.arange(n * 3, dtype=np.float32).reshape(n, 3), np.arange(n, dtype=np.int64) % 4


class Squares(Dataset):
    def __init__(self, n):
        self.n = n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        return i * i

    def __len__(self):
        return self.n


# --- Dataset / TensorDataset / Subset / ConcatDataset ---------------------------------------------------
def test_dataset_base_requires_getitem():
    with pytest.raises(NotImplementedError, match="__getitem__"):
        Dataset()[0]


def test_abstract_iterables_name_the_missing_method():
    from minigrad.utils.data import IterableDataset, Sampler

    class Stream(IterableDataset):
        pass

    class MySampler(Sampler):
        pass
    with pytest.raises(NotImplementedError, match="Stream must implement __iter__"):
        iter(Stream())
    with pytest.raises(NotImplementedError, match="MySampler must implement __iter__"):
        iter(MySampler())


def test_tensor_dataset_rows_and_len():
    x, y = _xy()
    ds = TensorDataset(mg.tensor(x), mg.tensor(y))
    assert len(ds) == 10
    xi, yi = ds[7]
    np.testing.assert_array_equal(xi.numpy(), x[7])
    assert yi.item() == y[7] and yi.dtype == mg.int64 and xi.dtype == mg.float32


def test_tensor_dataset_accepts_numpy_and_keeps_dtype():
    x, y = _xy()
    ds = TensorDataset(x, y)
    assert ds.tensors[0].dtype == mg.float32 and ds.tensors[1].dtype == mg.int64


def test_tensor_dataset_size_mismatch():
    with pytest.raises(ShapeError, match="size mismatch.*10.*9"):
        TensorDataset(np.zeros((10, 2)), np.zeros(9))
    with pytest.raises(ArgumentError):
        TensorDataset()


def test_tensor_dataset_fast_path_matches_per_sample_path():
    x, y = _xy(20)
    ds = TensorDataset(x, y)
    idx = [3, 0, 19, 7, 7]
    fast = [t.array for t in ds._fetch_batch(idx)]
    slow = default_collate([ds[i] for i in idx])
    np.testing.assert_array_equal(fast[0], slow[0].numpy())
    np.testing.assert_array_equal(fast[1], slow[1].numpy())
    assert fast[0].dtype == np.float32 and fast[1].dtype == np.int64


def test_tensor_dataset_subclass_disables_fast_path():
    class Doubled(TensorDataset):
        def __getitem__(self, i):
            x, y = super().__getitem__(i)
            return x * 2, y

    assert Doubled(*_xy())._fetch_batch([0, 1]) is NotImplemented


def test_subset_maps_indices_and_fast_path():
    x, y = _xy(10)
    ds = TensorDataset(x, y)
    sub = Subset(ds, [9, 2, 5])
    assert len(sub) == 3
    np.testing.assert_array_equal(sub[0][0].numpy(), x[9])
    batch = sub._fetch_batch([2, 0])
    np.testing.assert_array_equal(batch[0].array, x[[5, 9]])
    assert Subset(Squares(5), [4, 1])._fetch_batch([0]) is NotImplemented
    assert Subset(Squares(5), [4, 1])[0] == 16


def test_concat_dataset_and_add():
    a, b = Squares(3), Squares(4)
    c = a + b
    assert isinstance(c, ConcatDataset) and len(c) == 7
    assert [c[i] for i in range(7)] == [0, 1, 4, 0, 1, 4, 9]
    assert c[-1] == 9
    with pytest.raises(IndexError):
        c[7]


# --- random_split ---------------------------------------------------------------------------------------
def test_random_split_lengths_partition_the_dataset():
    parts = random_split(Squares(10), [3, 7], generator=mg.Generator().manual_seed(1))
    assert [len(p) for p in parts] == [3, 7]
    assert sorted(parts[0].indices + parts[1].indices) == list(range(10))


def test_random_split_fractions_and_remainder():
    parts = random_split(Squares(10), [0.5, 0.3, 0.2], generator=mg.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [5, 3, 2]
    parts = random_split(Squares(11), [0.5, 0.5], generator=mg.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [6, 5]


def test_random_split_is_reproducible_with_a_generator():
    a = random_split(Squares(50), [25, 25], generator=mg.Generator().manual_seed(42))
    b = random_split(Squares(50), [25, 25], generator=mg.Generator().manual_seed(42))
    c = random_split(Squares(50), [25, 25], generator=mg.Generator().manual_seed(43))
    assert a[0].indices == b[0].indices
    assert a[0].indices != c[0].indices


def test_random_split_follows_the_global_seed():
    mg.manual_seed(5)
    a = random_split(Squares(30), [10, 20])[0].indices
    mg.manual_seed(5)
    b = random_split(Squares(30), [10, 20])[0].indices
    assert a == b


def test_random_split_bad_lengths():
    with pytest.raises(ArgumentError, match="does not equal"):
        random_split(Squares(10), [3, 3])
    with pytest.raises(ArgumentError):
        random_split(Squares(10), [-1, 11])


# --- samplers -------------------------------------------------------------------------------------------
def test_sequential_and_batch_sampler():
    s = SequentialSampler(range(7))
    assert list(s) == list(range(7))
    assert list(BatchSampler(s, 3, drop_last=False)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(BatchSampler(s, 3, drop_last=True)) == [[0, 1, 2], [3, 4, 5]]
    assert len(BatchSampler(s, 3, False)) == 3 and len(BatchSampler(s, 3, True)) == 2
    with pytest.raises(ArgumentError):
        BatchSampler(s, 0, False)


def test_random_sampler_permutation_and_generator():
    g1, g2 = mg.Generator().manual_seed(3), mg.Generator().manual_seed(3)
    s1, s2 = RandomSampler(range(20), generator=g1), RandomSampler(range(20), generator=g2)
    e1, e2 = list(s1), list(s2)
    assert sorted(e1) == list(range(20)) and e1 == e2
    assert list(s1) != e1  # a new epoch, a new order (same generator, advanced)


def test_random_sampler_replacement_and_num_samples():
    s = RandomSampler(range(5), replacement=True, num_samples=50, generator=mg.Generator().manual_seed(0))
    draws = list(s)
    assert len(draws) == 50 and len(s) == 50 and set(draws) <= set(range(5))
    s = RandomSampler(range(5), num_samples=12, generator=mg.Generator().manual_seed(0))
    draws = list(s)
    assert len(draws) == 12 and sorted(draws[:5]) == list(range(5)) and sorted(draws[5:10]) == list(range(5))


def test_random_sampler_draws_lazily_so_an_endless_epoch_costs_nothing_up_front():
    """makemore's loader: RandomSampler(replacement=True, num_samples=int(1e10)) must start at once
    (drawing every index up front needed 74 GiB), and a loader over it yields batches as usual."""
    import itertools
    import time
    from minigrad.utils.data import DataLoader
    g = mg.Generator().manual_seed(0)
    t0 = time.perf_counter()
    s = RandomSampler(range(7), replacement=True, num_samples=int(1e10), generator=g)
    first = list(itertools.islice(iter(s), 100))
    assert time.perf_counter() - t0 < 1.0 and len(s) == 10 ** 10 and set(first) <= set(range(7))
    # the same seed gives the same stream whichever way it is consumed
    again = list(itertools.islice(iter(RandomSampler(range(7), replacement=True, num_samples=100,
                                                     generator=mg.Generator().manual_seed(0))), 100))
    assert first == again
    s = RandomSampler(range(3), num_samples=10 ** 12, generator=g)          # permutations, one at a time
    head = list(itertools.islice(iter(s), 6))
    assert sorted(head[:3]) == [0, 1, 2] and sorted(head[3:]) == [0, 1, 2]
    data = mg.arange(7)
    loader = DataLoader(data, batch_size=4, sampler=RandomSampler(data, replacement=True,
                                                                  num_samples=int(1e10)))
    batch = next(iter(loader))
    assert tuple(batch.shape) == (4,) and bool(((batch >= 0) & (batch < 7)).all())


def test_subset_random_and_weighted_samplers():
    s = SubsetRandomSampler([10, 20, 30], generator=mg.Generator().manual_seed(0))
    assert sorted(s) == [10, 20, 30]
    w = WeightedRandomSampler([0.0, 0.0, 1.0, 0.0], 20, generator=mg.Generator().manual_seed(0))
    assert list(w) == [2] * 20
    w = WeightedRandomSampler([1, 1, 1, 1], 4, replacement=False, generator=mg.Generator().manual_seed(0))
    assert sorted(w) == [0, 1, 2, 3]
    with pytest.raises(ArgumentError):
        WeightedRandomSampler([-1.0, 2.0], 3)


# --- collation ------------------------------------------------------------------------------------------
def test_collate_tensors_are_stacked():
    batch = default_collate([mg.tensor([1.0, 2.0]), mg.tensor([3.0, 4.0])])
    assert isinstance(batch, mg.Tensor) and batch.shape == (2, 2) and batch.dtype == mg.float32
    np.testing.assert_array_equal(batch.numpy(), [[1, 2], [3, 4]])


def test_collate_numpy_and_numbers():
    b = default_collate([np.zeros((2, 2), np.float16), np.ones((2, 2), np.float16)])
    assert b.shape == (2, 2, 2) and b.dtype == mg.float16
    assert default_collate([1, 2, 3]).dtype == mg.int64
    f = default_collate([1.5, 2.5])
    assert f.dtype == mg.float64 and f.tolist() == [1.5, 2.5]
    assert default_collate([1, 2.5]).tolist() == [1.0, 2.5]  # mixed: float, nothing truncated
    assert default_collate([True, False]).dtype == mg.bool
    assert default_collate([np.int32(1), np.int32(2)]).dtype == mg.int32
    assert default_collate(["a", "b"]) == ["a", "b"]


def test_collate_nested_structures():
    Point = collections.namedtuple("Point", "x y")
    samples = [{"img": np.full(3, i, np.float32), "meta": (i, "s%d" % i), "p": Point(i, 2.0 * i)}
               for i in range(4)]
    b = default_collate(samples)
    assert set(b) == {"img", "meta", "p"}
    assert b["img"].shape == (4, 3)
    ids, names = b["meta"]
    assert ids.tolist() == [0, 1, 2, 3] and names == ["s0", "s1", "s2", "s3"]
    assert isinstance(b["p"], Point) and b["p"].y.tolist() == [0.0, 2.0, 4.0, 6.0]
    pairs = default_collate([(np.zeros(2), 1), (np.ones(2), 0)])
    assert isinstance(pairs, list) and pairs[0].shape == (2, 2) and pairs[1].tolist() == [1, 0]


def test_collate_errors_are_clear():
    with pytest.raises(ShapeError, match=r"equal shapes.*\(3,\).*\(4,\)"):
        default_collate([np.zeros(3), np.zeros(4)])
    with pytest.raises(ShapeError, match="equal size"):
        default_collate([(1, 2), (1, 2, 3)])
    with pytest.raises(DTypeError, match="found object"):
        default_collate([object(), object()])
    with pytest.raises(DTypeError):
        default_collate([np.array(["a"]), np.array(["b"])])


def test_default_convert():
    out = default_convert({"x": np.arange(3), "n": 5, "s": "hi"})
    assert isinstance(out["x"], mg.Tensor) and out["x"].tolist() == [0, 1, 2]
    assert out["n"] == 5 and out["s"] == "hi"
