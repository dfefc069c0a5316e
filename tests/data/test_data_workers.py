"""DataLoader with worker processes: order, seeding, errors, shutdown (no hangs, no leftover processes)."""
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import minigrad as mg
from minigrad.utils.data import (DataLoader, Dataset, IterableDataset, TensorDataset, WorkerError,
                                 get_worker_info)

pytestmark = pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(),
                                reason="worker tests use the fork start method")


@pytest.fixture(autouse=True)
def no_leftover_workers():
    yield
    deadline = time.monotonic() + 5
    while multiprocessing.active_children() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert multiprocessing.active_children() == []


def _ds(n=40):
    return TensorDataset(np.arange(n * 3, dtype=np.float32).reshape(n, 3), np.arange(n, dtype=np.int64))


def _labels(loader):
    return [yb.tolist() for _, yb in loader]


def explode_in_worker(i):
    raise ValueError(f"sample {i} is broken")


class Exploding(Dataset):
    def __init__(self, n=20, bad=5):
        self.n, self.bad = n, bad

    def __getitem__(self, i):
        if i == self.bad:
            explode_in_worker(i)
        return np.float32(i)

    def __len__(self):
        return self.n


class MissingKey(Dataset):
    def __getitem__(self, i):
        return {}["no-such-key"]

    def __len__(self):
        return 4


class Slow(Dataset):
    """Later samples are faster, so batches finish out of order."""

    def __init__(self, n=24, delay=0.01):
        self.n, self.delay = n, delay

    def __getitem__(self, i):
        time.sleep(self.delay * ((self.n - i) % 5))
        return np.int64(i)

    def __len__(self):
        return self.n


class WhoAmI(Dataset):
    def __getitem__(self, i):
        info = get_worker_info()
        return {"worker": -1 if info is None else info.id, "np": np.random.random(), "py": random.random(),
                "mg": float(mg.rand(1).item()), "seed": -1 if info is None else info.seed % 2**31}

    def __len__(self):
        return 16


class Dies(Dataset):
    def __getitem__(self, i):
        os._exit(3)

    def __len__(self):
        return 8


class Sleeps(Dataset):
    def __getitem__(self, i):
        time.sleep(30)
        return i

    def __len__(self):
        return 4


class ShardedStream(IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        if info is None:
            return iter(range(self.n))
        return iter(range(info.id, self.n, info.num_workers))


class Stream(IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))


# --- order and determinism ------------------------------------------------------------------------------
@pytest.mark.parametrize("num_workers", [1, 2, 3])
def test_order_with_workers_equals_order_without(num_workers):
    def run(nw):
        loader = DataLoader(_ds(37), batch_size=4, shuffle=True, num_workers=nw,
                            generator=mg.Generator().manual_seed(11))
        return [(xb.numpy().copy(), yb.tolist()) for xb, yb in loader]

    ref, got = run(0), run(num_workers)
    assert [y for _, y in got] == [y for _, y in ref]
    for (gx, _), (rx, _) in zip(got, ref):
        np.testing.assert_array_equal(gx, rx)


def test_same_seed_same_order_different_seed_different_order():
    def run(seed):
        return _labels(DataLoader(_ds(40), batch_size=5, shuffle=True, num_workers=2,
                                  generator=mg.Generator().manual_seed(seed)))

    a, b, c = run(1), run(1), run(2)
    assert a == b and a != c and sorted(sum(a, [])) == list(range(40))


def test_out_of_order_completion_still_yields_in_order():
    loader = DataLoader(Slow(), batch_size=2, num_workers=3, prefetch_factor=3)
    assert [b.tolist() for b in loader] == [[i, i + 1] for i in range(0, 24, 2)]


def test_dtypes_shapes_and_len_match_main_process():
    loader = DataLoader(_ds(10), batch_size=4, num_workers=2, drop_last=True)
    batches = list(loader)
    assert len(loader) == 2 == len(batches)
    xb, yb = batches[0]
    assert isinstance(xb, mg.Tensor) and xb.dtype == mg.float32 and xb.shape == (4, 3) and yb.dtype == mg.int64


def test_custom_collate_returning_tensors_and_dicts():
    def collate(samples):
        xs = mg.stack([x for x, _ in samples])
        return {"x": xs * 2, "n": len(samples), "ys": np.array([int(y) for _, y in samples])}

    out = list(DataLoader(_ds(6), batch_size=4, num_workers=2, collate_fn=collate))
    assert isinstance(out[0]["x"], mg.Tensor) and out[0]["x"].shape == (4, 3) and out[0]["n"] == 4
    np.testing.assert_array_equal(out[0]["x"].numpy(), _ds(6).tensors[0].numpy()[:4] * 2)
    assert isinstance(out[1]["ys"], np.ndarray) and out[1]["ys"].tolist() == [4, 5]


def test_batch_size_none_with_workers():
    items = list(DataLoader(_ds(5), batch_size=None, num_workers=2))
    assert [y.item() for _, y in items] == [0, 1, 2, 3, 4]


# --- seeding and worker info ----------------------------------------------------------------------------
def test_worker_info_and_per_worker_seeds_are_distinct_and_reproducible():
    def run(seed):
        loader = DataLoader(WhoAmI(), batch_size=2, num_workers=2, generator=mg.Generator().manual_seed(seed))
        return list(loader)

    a, b = run(5), run(5)
    workers = sorted({int(w) for batch in a for w in batch["worker"].tolist()})
    assert workers == [0, 1]
    # each worker has its own RNG streams: the two workers' first samples differ
    first = {int(batch["worker"][0].item()): batch for batch in a}
    for key in ("np", "py", "mg"):
        assert first[0][key][0].item() != first[1][key][0].item()
    seeds = {int(batch["worker"][0].item()): int(batch["seed"][0].item()) for batch in a}
    assert seeds[1] == (seeds[0] + 1) % 2**31
    for ba, bb in zip(a, b):  # same generator seed -> the same random numbers in the workers
        for key in ("np", "py", "mg"):
            assert ba[key].tolist() == bb[key].tolist()


def test_worker_init_fn_runs_in_each_worker(tmp_path):
    def init(worker_id):
        (tmp_path / f"w{worker_id}-{os.getpid()}").write_text(str(get_worker_info().num_workers))

    list(DataLoader(_ds(8), batch_size=2, num_workers=3, worker_init_fn=init))
    names = sorted(p.name.split("-")[0] for p in tmp_path.iterdir())
    assert names == ["w0", "w1", "w2"]
    assert {p.read_text() for p in tmp_path.iterdir()} == {"3"}
    assert all(int(p.name.split("-")[1]) != os.getpid() for p in tmp_path.iterdir())


def test_get_worker_info_is_none_in_main_process():
    assert get_worker_info() is None


# --- errors ---------------------------------------------------------------------------------------------
def test_worker_error_is_reraised_with_worker_traceback():
    loader = DataLoader(Exploding(), batch_size=2, num_workers=2)
    with pytest.raises(ValueError) as info:
        for _ in loader:
            pass
    msg = str(info.value)
    assert "Caught ValueError in DataLoader worker process" in msg
    assert "explode_in_worker" in msg and "sample 5 is broken" in msg and "Traceback" in msg
    assert "explode_in_worker" in info.value.worker_traceback
    assert multiprocessing.active_children() == []


def test_batches_before_the_error_are_delivered():
    seen = []
    with pytest.raises(ValueError):
        for b in DataLoader(Exploding(n=20, bad=9), batch_size=2, num_workers=2):
            seen.append(b.tolist())
    assert seen == [[0, 1], [2, 3], [4, 5], [6, 7]]


def test_worker_init_fn_error_is_reraised():
    def bad_init(worker_id):
        raise RuntimeError("init failed in worker")

    with pytest.raises(RuntimeError, match="(?s)worker process.*bad_init.*init failed in worker"):
        list(DataLoader(_ds(8), batch_size=2, num_workers=2, worker_init_fn=bad_init))


def test_key_error_message_is_readable():
    with pytest.raises(KeyError) as info:
        list(DataLoader(MissingKey(), batch_size=2, num_workers=1))
    assert "no-such-key" in str(info.value) and "\\n" not in str(info.value)


def test_unrebuildable_exception_type_becomes_worker_error():
    class LocalError(Exception):  # defined in a function: cannot be pickled to the main process
        pass

    class Raises(Dataset):
        def __getitem__(self, i):
            raise LocalError("local trouble")

        def __len__(self):
            return 2

    with pytest.raises(WorkerError, match="(?s)LocalError.*local trouble"):
        list(DataLoader(Raises(), batch_size=1, num_workers=1))


def test_unpicklable_batch_is_an_error_not_a_hang():
    with pytest.raises(Exception, match="picklable"):
        list(DataLoader(_ds(4), batch_size=2, num_workers=1, collate_fn=lambda s: (lambda: None), timeout=20))


def test_dead_worker_is_detected():
    with pytest.raises(WorkerError, match="exited unexpectedly with exit code 3"):
        list(DataLoader(Dies(), batch_size=2, num_workers=2))


def test_timeout():
    t0 = time.monotonic()
    with pytest.raises(WorkerError, match="timed out after 0.3 seconds"):
        list(DataLoader(Sleeps(), batch_size=1, num_workers=1, timeout=0.3))
    assert time.monotonic() - t0 < 15  # the sleeping worker is terminated, not waited for


# --- shutdown -------------------------------------------------------------------------------------------
def test_break_leaves_no_live_children():
    loader = DataLoader(_ds(400), batch_size=2, num_workers=2, prefetch_factor=4)
    for i, _ in enumerate(loader):
        assert len(multiprocessing.active_children()) == 2
        if i == 3:
            break
    assert multiprocessing.active_children() == []


def test_exception_in_loop_body_leaves_no_live_children():
    def train():
        for _ in DataLoader(_ds(400), batch_size=2, num_workers=2):
            raise ArithmeticError("loss is nan")

    with pytest.raises(ArithmeticError):
        train()
    assert multiprocessing.active_children() == []


def test_exhaustion_shuts_workers_down_before_the_loop_ends():
    it = iter(DataLoader(_ds(6), batch_size=2, num_workers=2))
    assert len(list(it)) == 3
    assert multiprocessing.active_children() == []  # even though `it` is still referenced
    assert list(it) == []


def test_interpreter_exit_with_live_iterator_does_not_hang():
    script = textwrap.dedent("""
        import numpy as np, minigrad as mg
        from minigrad.utils.data import DataLoader, TensorDataset
        ds = TensorDataset(np.zeros((1000, 3), np.float32), np.arange(1000))
        it = iter(DataLoader(ds, batch_size=2, num_workers=2))
        next(it)
        print("pids", *[w.pid for w in it._state.workers], flush=True)
        # exit with the iterator (and its workers) still alive
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    pids = [int(p) for p in proc.stdout.split()[1:]]
    assert len(pids) == 2 and all(not _pid_running(p) for p in pids)


def _pid_running(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return "\nState:\tZ" not in f.read()
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc")
def test_workers_exit_when_the_main_process_is_killed():
    script = textwrap.dedent("""
        import os, signal, numpy as np, minigrad as mg
        from minigrad.utils.data import DataLoader, TensorDataset
        ds = TensorDataset(np.zeros((1000, 3), np.float32), np.arange(1000))
        it = iter(DataLoader(ds, batch_size=2, num_workers=2))
        next(it)
        print("pids", *[w.pid for w in it._state.workers], flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL
    pids = [int(p) for p in proc.stdout.split()[1:]]
    assert len(pids) == 2
    deadline = time.monotonic() + 15
    while any(_pid_running(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_pid_running(p) for p in pids)


# --- iterable datasets and persistent workers -----------------------------------------------------------
def test_iterable_dataset_sharded_across_workers():
    batches = [b.tolist() for b in DataLoader(ShardedStream(20), batch_size=3, num_workers=2)]
    assert sorted(sum(batches, [])) == list(range(20))


def test_iterable_dataset_unsharded_repeats_per_worker():
    items = sum((b.tolist() for b in DataLoader(Stream(5), batch_size=2, num_workers=3)), [])
    assert sorted(items) == sorted(list(range(5)) * 3)


def test_iterable_dataset_drop_last_per_worker():
    batches = [b.tolist() for b in DataLoader(ShardedStream(10), batch_size=4, num_workers=2, drop_last=True)]
    assert all(len(b) == 4 for b in batches) and len(batches) == 2


def test_persistent_workers_reuse_processes_and_restart_epochs():
    loader = DataLoader(_ds(20), batch_size=4, num_workers=2, persistent_workers=True, shuffle=True,
                        generator=mg.Generator().manual_seed(0))
    e1 = _labels(loader)
    pids = sorted(p.pid for p in multiprocessing.active_children())
    assert len(pids) == 2
    for i, _ in enumerate(loader):  # leave an epoch early ...
        if i == 1:
            break
    e3 = _labels(loader)            # ... and the next one is still complete and correct
    assert sorted(p.pid for p in multiprocessing.active_children()) == pids
    assert sorted(sum(e1, [])) == sorted(sum(e3, [])) == list(range(20)) and e1 != e3
    ref = DataLoader(_ds(20), batch_size=4, shuffle=True, generator=mg.Generator().manual_seed(0))
    r1 = _labels(ref)
    for i, _ in enumerate(ref):
        if i == 1:
            break
    assert e1 == r1 and e3 == _labels(ref)
    del loader  # dropping the loader shuts its workers down (no reference cycle keeps them alive)
    assert multiprocessing.active_children() == []


def test_persistent_workers_iterable_restarts_stream():
    loader = DataLoader(ShardedStream(9), batch_size=2, num_workers=2, persistent_workers=True)
    a = sorted(sum((b.tolist() for b in loader), []))
    b = sorted(sum((b.tolist() for b in loader), []))
    assert a == b == list(range(9))
    del loader
    assert multiprocessing.active_children() == []
