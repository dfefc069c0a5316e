"""The 'nccl' backend on the emulated CUDA device with the fake cupy.cuda.nccl (bytes moved by MPI).
``nccl_fake.py OUT``: collectives and a DDP run on 'cuda' tensors; saves results and the fake's call log."""
import json
import os
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).parents[1]))
import fake_nccl  # noqa: E402

fake_nccl.install()
import minigrad as mg  # noqa: E402
import minigrad.distributed as dist  # noqa: E402
sys.path.insert(0, str(pathlib.Path(__file__).parent))
from dist_models import LR, STEPS, data, loss_fn, mlp, shard  # noqa: E402

out = sys.argv[1]
dist.init_process_group("nccl", timeout=20)
rank, world = dist.get_rank(), dist.get_world_size()
save = {}
t = mg.tensor(np.arange(4.0) + rank, device="cuda")
dist.all_reduce(t, op=dist.ReduceOp.AVG)
save["avg"] = t.cpu().numpy()
t = mg.tensor(np.arange(4.0) * (rank + 1), device="cuda")
dist.all_reduce(t, op=dist.ReduceOp.MAX)
save["max"] = t.cpu().numpy()
outs = [mg.zeros(2, device="cuda") for _ in range(world)]
dist.all_gather(outs, mg.tensor([rank, 10.0 + rank], device="cuda"))
save["gather"] = np.stack([o.cpu().numpy() for o in outs])
o = mg.zeros(2, device="cuda")
dist.reduce_scatter(o, [mg.tensor([1.0, 2.0], device="cuda") * (i + 1) for i in range(world)])
save["reduce_scatter"] = o.cpu().numpy()
b = mg.tensor([float(rank)] * 3, device="cuda")
dist.broadcast(b, src=1)
save["broadcast"] = b.cpu().numpy()
if rank == 0:
    dist.send(mg.tensor([5.0, 6.0], device="cuda"), dst=1)
else:
    r = mg.zeros(2, device="cuda")
    dist.recv(r, src=0)
    save["recv"] = r.cpu().numpy()
try:
    dist.all_reduce(mg.ones(2))
except mg.errors.DeviceError as e:
    save["cpu_error"] = np.array(str(e))
fake_nccl.calls.clear()
dist.barrier()
barrier_calls = [c[0] for c in fake_nccl.calls]

model = mlp(seed=rank).to("cuda")
ddp = dist.DistributedDataParallel(model)
for n, p in model.named_parameters():
    save[f"init.{n}"] = p.detach().cpu().numpy()
opt = mg.optim.SGD(model.parameters(), lr=LR)
for step in range(STEPS):
    opt.zero_grad()
    x, y = (v.to("cuda") for v in shard(data(step), rank))
    loss_fn(ddp, x, y).backward()
    opt.step()
for n, p in model.named_parameters():
    save[f"sgd.{n}"] = p.detach().cpu().numpy()

# the parallelism layers on 'cuda' tensors: FSDP (all-gather / reduce-scatter into flat buffers), tensor
# parallel over a subgroup of both ranks (its own NCCL communicator), a pipeline's send/recv
from minigrad.distributed.fsdp import FullyShardedDataParallel  # noqa: E402
from minigrad.distributed.pipelining import PipelineStage, ScheduleGPipe  # noqa: E402
from minigrad.distributed.tensor_parallel import ColwiseParallel, RowwiseParallel, parallelize_module  # noqa: E402
model = mlp(seed=rank).to("cuda")
fsdp = FullyShardedDataParallel(model, auto_wrap_policy={mg.nn.Linear})
opt = mg.optim.SGD(fsdp.parameters(), lr=LR)
for step in range(STEPS):
    opt.zero_grad()
    x, y = (v.to("cuda") for v in shard(data(step), rank))
    loss_fn(fsdp, x, y).backward()
    opt.step()
for n, p in fsdp.state_dict().items():
    save[f"fsdp.{n}"] = p.cpu().numpy()
fake_nccl.calls.clear()
group = dist.new_group([0, 1])
tp = parallelize_module(mlp(seed=0).to("cuda"), group, {"0": ColwiseParallel(), "2": RowwiseParallel()})
x, y = (v.to("cuda") for v in (mg.tensor(a) for a in data(0)))
loss_fn(tp, x, y).backward()
save["tp_grad"] = tp[2].weight.grad.cpu().numpy()
tp_calls = sorted({c[0] for c in fake_nccl.calls})
full = mlp(seed=0).to("cuda")
stage = PipelineStage(mg.nn.Sequential(*(list(full)[:3] if rank == 0 else list(full)[3:])), rank, 2, device="cuda")
sched = ScheduleGPipe(stage, 2, loss_fn=lambda o, t: ((o - t) ** 2).mean())
sched.step(x, target=y) if rank == 0 else sched.step(target=y)
for n, p in full.named_parameters():
    if p.grad is not None:
        save[f"pp.{n}"] = p.grad.cpu().numpy()
np.savez(os.path.join(out, f"rank{rank}.npz"), **save)
with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
    json.dump({"barrier_calls": barrier_calls, "tp_calls": tp_calls}, f)
dist.destroy_process_group()
