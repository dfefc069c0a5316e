"""Collectives worker, started by a plain ``mpiexec -n 2`` (no MASTER_PORT: MPI does the rendezvous).
``collectives.py OUT``: every rank saves what each collective gave it to OUT/rank{r}.npz; the test
recomputes every expected value with NumPy from the same inputs (``inputs(rank, dtype)``)."""
import os
import sys
import time

import numpy as np

import minigrad as mg
import minigrad.distributed as dist

DTYPES = ["float16", "float32", "float64", "int32", "int64", "uint8"]
OPS = ["SUM", "AVG", "PRODUCT", "MIN", "MAX"]


def inputs(rank, dtype, n=5):
    rng = np.random.default_rng(rank + 10)
    return (rng.integers(1, 4, n) if np.dtype(dtype).kind in "iu" else rng.uniform(0.5, 2, n)).astype(dtype)


if __name__ == "__main__":
    out = sys.argv[1]
    dist.init_process_group("mpi", timeout=20)
    rank, world = dist.get_rank(), dist.get_world_size()
    res = {}
    for dtype in DTYPES:
        for op in OPS:
            t = mg.tensor(inputs(rank, dtype))
            try:
                dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
                res[f"all_reduce.{op}.{dtype}"] = t.numpy()
            except mg.errors.ArgumentError as e:
                res[f"all_reduce.{op}.{dtype}.error"] = np.array(str(e))
        t = mg.tensor(inputs(rank, dtype))
        dist.broadcast(t, src=1)
        res[f"broadcast.{dtype}"] = t.numpy()
        outs = [mg.zeros(5, dtype=getattr(mg, dtype)) for _ in range(world)]
        dist.all_gather(outs, mg.tensor(inputs(rank, dtype)))
        res[f"all_gather.{dtype}"] = np.stack([o.numpy() for o in outs])
        o = mg.zeros(5, dtype=getattr(mg, dtype))
        dist.reduce_scatter(o, [mg.tensor(inputs(rank, dtype)) * (i + 1) for i in range(world)])
        res[f"reduce_scatter.{dtype}"] = o.numpy()
    # point to point, and a receive from any rank
    if rank == 0:
        dist.send(mg.tensor(inputs(0, "float64")), dst=1, tag=7)
    else:
        got = mg.zeros(5, dtype=mg.float64)
        res["recv.source"] = np.array(dist.recv(got, tag=7))
        res["recv"] = got.numpy()
    # async: issue, compute, wait
    big = mg.tensor(np.full(1 << 16, float(rank + 1)))
    t_issue = time.perf_counter()
    work = dist.all_reduce(big, async_op=True)
    a = mg.randn(64, 64)
    for _ in range(20):
        a = (a @ a).tanh()
    t_compute = time.perf_counter()
    work.wait()
    res["async.result"] = big.numpy()[:3]
    res["async.times"] = np.array([t_issue, t_compute, work.completed_at])
    res["async.is_completed"] = np.array(work.is_completed())
    # a non-contiguous tensor and an (emulated) CUDA tensor go through host copies
    nc = mg.tensor(np.arange(12.0).reshape(3, 4) * (rank + 1)).t()
    dist.all_reduce(nc)
    res["noncontiguous"] = nc.numpy()
    if mg.cuda.is_available():
        c = mg.tensor(inputs(rank, "float32"), device="cuda")
        dist.all_reduce(c)
        res["cuda"] = c.cpu().numpy()
    dist.barrier()
    res["stats.all_reduce.calls"] = np.array(dist.comm_stats()["all_reduce"]["calls"])
    np.savez(os.path.join(out, f"rank{rank}.npz"), **res)
    dist.destroy_process_group()
