"""The pieces that need no second process: the store, bucket assignment, the sampler, argument errors,
ZeRO's partition and the launcher's environment (its spawn mode runs a tiny store-only job)."""
import subprocess
import sys
import time

import numpy as np
import pytest

import minigrad as mg
import minigrad.distributed as dist
from minigrad.distributed.ddp import MiB, assign_buckets
from minigrad.distributed.run import mpiexec_command, rank_envs, parse_args
from minigrad.distributed.zero import partition
from minigrad.utils.data import DataLoader, DistributedSampler, TensorDataset
from dist_jobs import REPO, _env


def test_store_set_get_add_and_timeouts():
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, timeout=5)
    try:
        other = dist.TCPStore("127.0.0.1", store.port, timeout=5)
        store.set("id", bytes(range(200, 256)))
        assert other.get("id") == bytes(range(200, 256))
        assert other.add("n", 2) == 2 and store.add("n", 1) == 3
        t0 = time.monotonic()
        with pytest.raises(dist.DistTimeoutError, match="key 'missing' was not set within 0.2 s"):
            other.get("missing", timeout=0.2)
        assert time.monotonic() - t0 < 2
        other.start_heartbeat(1, lambda: (4, "all_reduce"), interval=0.05)
        time.sleep(0.2)
        s = store.status()[1]
        assert s["alive"] and s["seq"] == 4 and s["what"] == "all_reduce" and s["age"] < 1
        other.close()
        time.sleep(0.2)
        s = store.status()[1]
        assert not s["alive"] and s["left"]   # a clean close says goodbye: 'left', not 'died'
    finally:
        store.close()


def test_store_that_is_not_there_is_a_clear_error():
    with pytest.raises(dist.DistTimeoutError, match="could not reach the store at 127.0.0.1:1 within 0.3 s"):
        dist.TCPStore("127.0.0.1", 1, timeout=0.3)


class _P:  # a parameter stand-in: only what assign_buckets reads
    def __init__(self, nbytes, dtype=np.float32):
        self.array = np.empty(nbytes // np.dtype(dtype).itemsize, dtype)
        self.dtype, self.device = self.array.dtype, "cpu"


def test_buckets_reverse_order_first_1mib_then_25mib():
    sizes = [20 * MiB, 600 << 10, 600 << 10, 10 * MiB, 10 * MiB, 10 * MiB, 30 * MiB, 100]
    named = [(f"p{i}", _P(s)) for i, s in enumerate(sizes)]
    buckets = assign_buckets(named, 25 * MiB)
    assert [[n for n, _ in b.members] for b in buckets] == [
        ["p7"], ["p6"], ["p5", "p4"], ["p3", "p2", "p1"], ["p0"]]
    assert [b.nbytes for b in buckets] == [100, 30 * MiB, 20 * MiB, 10 * MiB + (1200 << 10), 20 * MiB]


def test_buckets_split_where_the_dtype_changes():
    named = [("a", _P(64, np.float32)), ("b", _P(64, np.float64)), ("c", _P(64, np.float64))]
    assert [[n for n, _ in b.members] for b in assign_buckets(named, MiB)] == [["c", "b"], ["a"]]


def test_distributed_sampler_shards_pad_and_reshuffle():
    ds = TensorDataset(mg.arange(10))
    shards = [list(DistributedSampler(ds, num_replicas=3, rank=r, seed=1)) for r in range(3)]
    assert all(len(s) == 4 for s in shards)
    flat = sorted(sum(shards, []))
    assert set(flat) == set(range(10)) and len(flat) == 12       # padded by repeating 2 indices
    s = DistributedSampler(ds, num_replicas=3, rank=0, seed=1)
    first = list(s)
    assert list(s) == first
    s.set_epoch(1)
    assert list(s) != first
    assert list(DistributedSampler(ds, num_replicas=3, rank=2, shuffle=False)) == [2, 5, 8, 1][:3] + [1]
    dropped = [list(DistributedSampler(ds, 3, r, drop_last=True)) for r in range(3)]
    assert all(len(d) == 3 for d in dropped) and len(set(sum(dropped, []))) == 9
    batches = list(DataLoader(ds, batch_size=2, sampler=DistributedSampler(ds, 2, 1, shuffle=False)))
    assert [b[0].tolist() for b in batches] == [[1, 3], [5, 7], [9]]


def test_sampler_needs_a_group_or_explicit_ranks():
    with pytest.raises(mg.errors.ArgumentError, match="call init_process_group first"):
        DistributedSampler(list(range(4)))
    with pytest.raises(mg.errors.ArgumentError, match="invalid rank 2"):
        DistributedSampler(list(range(4)), num_replicas=2, rank=2)


def test_errors_before_and_at_init():
    with pytest.raises(dist.DistributedError, match="has not been initialized"):
        dist.all_reduce(mg.ones(2))
    with pytest.raises(mg.errors.ArgumentError, match="unknown backend 'gloo'"):
        dist.init_process_group("gloo")
    with pytest.raises(mg.errors.ArgumentError, match="rank 3 is not in a world of size 2"):
        dist.init_process_group("mpi", rank=3, world_size=2)
    assert not dist.is_initialized()


def test_zero_partition_balances_elements():
    params = [mg.zeros(n) for n in (100, 10, 60, 50, 5)]
    shards = partition(params, 2)
    assert sorted(sum(shards, [])) == list(range(5))
    loads = [sum(params[i].numel() for i in s) for s in shards]
    assert abs(loads[0] - loads[1]) <= 15


def test_launcher_environment_and_mpiexec_line():
    args = parse_args(["--nproc-per-node", "2", "--nnodes", "2", "--node-rank", "1", "--master-port", "29500",
                       "train.py", "--lr", "1"])
    envs = rank_envs(args, 29500)
    assert [(e["RANK"], e["LOCAL_RANK"], e["WORLD_SIZE"]) for e in envs] == [("2", "0", "4"), ("3", "1", "4")]
    assert args.args == ["--lr", "1"]
    line = mpiexec_command("mpiexec", envs, ["python", "train.py"])
    assert line[:4] == ["mpiexec", "-launcher", "fork", "-disable-auto-cleanup"] and line.count(":") == 1


def test_launcher_spawn_mode_runs_ranks_that_meet_at_its_store(tmp_path):
    script = tmp_path / "meet.py"
    script.write_text(
        "import os, minigrad.distributed as dist\n"
        "s = dist.TCPStore(os.environ['MASTER_ADDR'], int(os.environ['MASTER_PORT']), timeout=10)\n"
        "s.set('hello/' + os.environ['RANK'], os.environ['LOCAL_RANK'])\n"
        "print('peer', s.get('hello/' + str(1 - int(os.environ['RANK']))).decode(), flush=True)\n")
    proc = subprocess.run([sys.executable, "-m", "minigrad.distributed.run", "--nproc-per-node", "2",
                           "--launcher", "spawn", str(script)], cwd=REPO, env=_env(), capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert sorted(proc.stdout.split()) == ["0", "1", "peer", "peer"]
