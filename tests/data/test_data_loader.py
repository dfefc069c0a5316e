"""DataLoader in the main process: batching, shuffling, samplers, collate_fn, len, argument checks."""
import numpy as np
import pytest

import minigrad as mg
from minigrad.errors import ArgumentError
from minigrad.utils.data import (BatchSampler, DataLoader, Dataset, IterableDataset, SequentialSampler,
                                 TensorDataset, default_collate)


def _ds(n=10):
    x = np.arange(n * 2, dtype=np.float32).reshape(n, 2)
    y = np.arange(n, dtype=np.int64)
    return TensorDataset(x, y)


class Dicts(Dataset):
    def __init__(self, n):
        self.n = n

    def __getitem__(self, i):
        return {"x": np.full(2, i, dtype=np.float32), "label": i, "name": f"item{i}"}

    def __len__(self):
        return self.n


class Stream(IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self):
        return self.n


def _labels(loader):
    return [yb.tolist() for _, yb in loader]


def test_batches_in_order_with_shapes_and_dtypes():
    loader = DataLoader(_ds(10), batch_size=4)
    batches = list(loader)
    assert len(batches) == 3 == len(loader)
    xb, yb = batches[0]
    assert isinstance(xb, mg.Tensor) and xb.shape == (4, 2) and xb.dtype == mg.float32
    assert yb.dtype == mg.int64 and yb.tolist() == [0, 1, 2, 3]
    assert batches[-1][1].tolist() == [8, 9]


def test_drop_last_and_len():
    loader = DataLoader(_ds(10), batch_size=4, drop_last=True)
    assert len(loader) == 2 and _labels(loader) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert len(DataLoader(_ds(10), batch_size=5)) == 2
    assert len(DataLoader(_ds(10), batch_size=3)) == 4


def test_shuffle_is_a_permutation_and_seeded():
    def epoch(seed):
        return _labels(DataLoader(_ds(50), batch_size=8, shuffle=True, generator=mg.Generator().manual_seed(seed)))

    a, b, c = epoch(0), epoch(0), epoch(1)
    assert sorted(sum(a, [])) == list(range(50))
    assert a == b and a != c


def test_shuffle_epochs_differ_and_follow_global_seed():
    mg.manual_seed(7)
    loader = DataLoader(_ds(30), batch_size=30, shuffle=True)
    e1, e2 = _labels(loader), _labels(loader)
    assert e1 != e2
    mg.manual_seed(7)
    assert _labels(loader) == e1


def test_fast_path_equals_generic_path():
    class Plain(Dataset):  # same samples, no _fetch_batch
        def __init__(self, ds):
            self.ds = ds

        def __getitem__(self, i):
            return self.ds[i]

        def __len__(self):
            return len(self.ds)

    ds = _ds(23)
    fast = list(DataLoader(ds, batch_size=5, shuffle=True, generator=mg.Generator().manual_seed(3)))
    slow = list(DataLoader(Plain(ds), batch_size=5, shuffle=True, generator=mg.Generator().manual_seed(3)))
    for (fx, fy), (sx, sy) in zip(fast, slow):
        np.testing.assert_array_equal(fx.numpy(), sx.numpy())
        np.testing.assert_array_equal(fy.numpy(), sy.numpy())
        assert fx.dtype == sx.dtype and fy.dtype == sy.dtype


def test_dict_samples_collate():
    b = next(iter(DataLoader(Dicts(5), batch_size=3)))
    assert b["x"].shape == (3, 2) and b["label"].tolist() == [0, 1, 2] and b["name"] == ["item0", "item1", "item2"]


def test_custom_collate_fn():
    def collate(samples):
        return len(samples), [int(y) for _, y in samples]

    out = list(DataLoader(_ds(5), batch_size=2, collate_fn=collate))
    assert out == [(2, [0, 1]), (2, [2, 3]), (1, [4])]


def test_sampler_and_batch_sampler():
    loader = DataLoader(_ds(6), batch_size=2, sampler=[5, 4, 3, 2, 1, 0])
    assert _labels(loader) == [[5, 4], [3, 2], [1, 0]]
    loader = DataLoader(_ds(6), batch_sampler=[[0, 5], [1], [2, 3, 4]])
    assert _labels(loader) == [[0, 5], [1], [2, 3, 4]] and len(loader) == 3
    loader = DataLoader(_ds(5), batch_sampler=BatchSampler(SequentialSampler(range(5)), 2, True))
    assert _labels(loader) == [[0, 1], [2, 3]]


def test_batch_size_none_disables_batching():
    loader = DataLoader(_ds(3), batch_size=None)
    items = list(loader)
    assert len(loader) == 3 and len(items) == 3
    x, y = items[1]
    assert x.shape == (2,) and y.item() == 1


def test_iterable_dataset_main_process():
    assert [b.tolist() for b in DataLoader(Stream(7), batch_size=3)] == [[0, 1, 2], [3, 4, 5], [6]]
    assert [b.tolist() for b in DataLoader(Stream(7), batch_size=3, drop_last=True)] == [[0, 1, 2], [3, 4, 5]]
    assert len(DataLoader(Stream(7), batch_size=3)) == 3


@pytest.mark.parametrize("kwargs, match", [
    (dict(shuffle=True, sampler=[0, 1]), "mutually exclusive"),
    (dict(batch_sampler=[[0]], batch_size=2), "batch_sampler"),
    (dict(batch_sampler=[[0]], drop_last=True), "batch_sampler"),
    (dict(batch_size=0), "batch_size"),
    (dict(num_workers=-1), "num_workers"),
    (dict(prefetch_factor=2), "prefetch_factor"),
    (dict(persistent_workers=True), "persistent_workers"),
    (dict(timeout=-1), "timeout"),
    (dict(batch_size=None, drop_last=True), "drop_last"),
])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ArgumentError, match=match):
        DataLoader(_ds(4), **kwargs)


def test_iterable_dataset_rejects_shuffle_and_sampler():
    with pytest.raises(ArgumentError, match="shuffle"):
        DataLoader(Stream(3), shuffle=True)
    with pytest.raises(ArgumentError, match="sampler"):
        DataLoader(Stream(3), sampler=[0])


def test_default_collate_is_the_default():
    assert DataLoader(_ds(2)).collate_fn is default_collate
