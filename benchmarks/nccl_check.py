"""make gpu-check's NCCL part: the 'nccl' backend on a real GPU.

1. A world of one, in this process: every collective and three DDP steps on 'cuda' tensors (float64),
   compared with the same steps without DDP; then FSDP (ZeRO-3, a unit per Linear), tensor parallel
   (column + row) and PowerSGD's hook, each against plain training, and a subgroup's own communicator.
2. Where NCCL allows it, two ranks sharing this GPU (``--rank-worker``, started by minigrad.distributed.run
   --launcher spawn): an all-reduce and a DDP step; NCCL refuses two ranks on one device on many versions
   ("Duplicate GPU detected"), which is reported as skipped, not failed.
Prints one line per check; exits non-zero if a check that can run fails.
"""
import os
import subprocess
import sys

import numpy as np

import minigrad as mg
import minigrad.distributed as dist
from minigrad import nn


def model(seed):
    mg.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 4)).double().to("cuda")


def fit(net, params, steps=3):
    """``steps`` SGD steps of ``net`` on fixed random data, the optimizer over ``params``."""
    opt = mg.optim.SGD(params, lr=0.1)
    rng = np.random.default_rng(0)
    for _ in range(steps):
        x = mg.tensor(rng.standard_normal((16, 8)), device="cuda")
        y = mg.tensor(rng.standard_normal((16, 4)), device="cuda")
        opt.zero_grad()
        ((net(x) - y) ** 2).mean().backward()
        opt.step()


def train(m, wrap, steps=3):
    params = list(m.parameters())
    fit(wrap(m), params, steps)
    return [p.detach().cpu().numpy() for p in m.parameters()]


def world_of_one():
    dist.init_process_group("nccl", rank=0, world_size=1, timeout=60)
    t = mg.tensor(np.arange(6.0), device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    dist.all_reduce(t, op=dist.ReduceOp.AVG, async_op=True).wait()
    outs = [mg.zeros(6, dtype=mg.float64, device="cuda")]
    dist.all_gather(outs, t)
    dist.broadcast(t, 0)
    dist.barrier()
    ok = np.array_equal(outs[0].cpu().numpy(), np.arange(6.0))
    a = train(model(0), lambda m: dist.DistributedDataParallel(m))
    b = train(model(0), lambda m: m)
    ok = ok and all(np.allclose(x, y, atol=1e-12) for x, y in zip(a, b))
    dist.destroy_process_group()
    print(f"nccl world of 1: collectives + DDP == plain training: {'ok' if ok else 'FAILED'}")
    return ok


def parallel_world_of_one():
    """FSDP, tensor parallel (on a subgroup: its own NCCL communicator) and a PowerSGD-hooked DDP on the real
    GPU, in a world of one: each must train exactly like the plain model (the collectives still run)."""
    from minigrad.distributed.algorithms.ddp_comm_hooks import PowerSGDState, powerSGD_hook
    from minigrad.distributed.fsdp import FullyShardedDataParallel
    from minigrad.distributed.tensor_parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    dist.init_process_group("nccl", rank=0, world_size=1, timeout=60)
    ref = train(model(0), lambda m: m)
    same = lambda got: all(np.allclose(a, b, atol=1e-12) for a, b in zip(got, ref))  # noqa: E731
    fsdp = FullyShardedDataParallel(model(0), auto_wrap_policy={nn.Linear})
    fit(fsdp, fsdp.parameters())
    ok_fsdp = same([v.cpu().numpy() for v in fsdp.state_dict().values()])
    tp = parallelize_module(model(0), dist.new_group([0]), {"0": ColwiseParallel(), "2": RowwiseParallel()})
    fit(tp, tp.parameters())
    ok_tp = same([p.detach().cpu().numpy() for p in tp.parameters()])

    def hooked(m):
        d = dist.DistributedDataParallel(m)
        d.register_comm_hook(PowerSGDState(None, 1, start_powerSGD_iter=10), powerSGD_hook)
        return d
    ok_hook = same(train(model(0), hooked))
    dist.destroy_process_group()
    print(f"nccl world of 1: FSDP {'ok' if ok_fsdp else 'FAILED'}, tensor parallel on a subgroup "
          f"{'ok' if ok_tp else 'FAILED'}, DDP with a comm hook {'ok' if ok_hook else 'FAILED'}")
    return ok_fsdp and ok_tp and ok_hook


def rank_worker():
    dist.init_process_group("nccl", timeout=60)
    r = dist.get_rank()
    t = mg.tensor([float(r + 1)] * 4, device="cuda")
    dist.all_reduce(t)
    params = train(model(r), lambda m: dist.DistributedDataParallel(m), steps=1)
    gathered = [mg.zeros(params[0].shape, dtype=mg.float64, device="cuda") for _ in range(2)]
    dist.all_gather(gathered, mg.tensor(params[0], device="cuda"))
    same = np.array_equal(gathered[0].cpu().numpy(), gathered[1].cpu().numpy())
    ok = np.array_equal(t.cpu().numpy(), [3.0] * 4) and same
    print(f"rank {r}: all_reduce and a DDP step {'ok' if ok else 'FAILED'}", flush=True)
    dist.destroy_process_group()
    sys.exit(0 if ok else 1)


def two_ranks_one_gpu():
    proc = subprocess.run([sys.executable, "-m", "minigrad.distributed.run", "--nproc-per-node", "2",
                           "--launcher", "spawn", __file__, "--rank-worker"], capture_output=True, text=True,
                          timeout=180, env=dict(os.environ, MINIGRAD_RUN_GRACE="60"))
    text = proc.stdout + proc.stderr
    if proc.returncode != 0 and ("Duplicate GPU" in text or "invalid usage" in text.lower()):
        print("nccl 2 ranks on one GPU: skipped (this NCCL refuses two ranks on one device)")
        return True
    print(f"nccl 2 ranks on one GPU: {'ok' if proc.returncode == 0 else 'FAILED'}")
    if proc.returncode != 0:
        print(text[-3000:])
    return proc.returncode == 0


if __name__ == "__main__":
    if "--rank-worker" in sys.argv:
        rank_worker()
    if not dist.is_nccl_available() or not mg.cuda.is_available() or mg.cuda.is_emulated():
        sys.exit("nccl_check: needs a real GPU and cupy.cuda.nccl")
    results = [world_of_one(), parallel_world_of_one(), two_ranks_one_gpu()]
    sys.exit(0 if all(results) else 1)
