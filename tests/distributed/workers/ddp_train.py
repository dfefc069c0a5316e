"""DDP worker: ``ddp_train.py OUT``. Each rank trains the shared MLP on its shard and saves what the test
compares (OUT/rank{r}.npz, OUT/rank{r}.json): parameters after plain DDP + SGD, after no_sync accumulation,
after DDP + ZeroRedundancyOptimizer(Adam), buckets and the recorded timeline, batch-norm buffers, and the
errors for unused parameters and mismatched models."""
import json
import os
import sys

import numpy as np

import minigrad as mg
import minigrad.distributed as dist
from minigrad import nn
from dist_models import LR, STEPS, data, loss_fn, mlp, shard

out = sys.argv[1]
dist.init_process_group("mpi", timeout=20)
rank = dist.get_rank()
save, info = {}, {}


def train(ddp, opt):
    for step in range(STEPS):
        opt.zero_grad()
        x, y = shard(data(step), rank)
        loss_fn(ddp, x, y).backward()
        opt.step()


# 1. plain DDP + SGD; every rank starts from a different init: DDP must broadcast rank 0's
model = mlp(seed=rank)
ddp = dist.DistributedDataParallel(model, bucket_cap_mb=1200 / 2**20, first_bucket_cap_mb=450 / 2**20)
for n, p in model.named_parameters():
    save[f"init.{n}"] = p.detach().numpy().copy()
train(ddp, mg.optim.SGD(model.parameters(), lr=LR))
for n, p in model.named_parameters():
    save[f"sgd.{n}"] = p.detach().numpy()
info["buckets"] = [[name for name, _ in b.members] for b in ddp.buckets]
info["bucket_bytes"] = ddp.bucket_sizes
info["timeline"] = ddp.timeline

# 2. no_sync: two micro-batches, the first without averaging
model = mlp(seed=0)
ddp = dist.DistributedDataParallel(model)
x1, y1 = shard(data(0, micro=1), rank)
x2, y2 = shard(data(0, micro=2), rank)
with ddp.no_sync():
    loss_fn(ddp, x1, y1).backward()
save["local_grad"] = model[0].weight.grad.numpy().copy()
loss_fn(ddp, x2, y2).backward()
for n, p in model.named_parameters():
    save[f"accum.{n}"] = p.grad.numpy()

# 3. ZeRO stage 1 with Adam
model = mlp(seed=0)
ddp = dist.DistributedDataParallel(model)
zero = dist.ZeroRedundancyOptimizer(model.parameters(), optimizer_class=mg.optim.Adam, lr=0.01)
train(ddp, zero)
for n, p in model.named_parameters():
    save[f"zero.{n}"] = p.detach().numpy()
info["zero_state_bytes"] = zero.state_bytes()
info["zero_shard"] = zero.shards[rank]

# 4. buffers: batch-norm statistics follow rank 0 at every forward
bn_model = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3)).double()
bn = dist.DistributedDataParallel(bn_model)
bn(mg.tensor(np.full((4, 4), float(rank)) + np.arange(4.0)[:, None]))
save["bn_after_train_forward"] = bn_model[1].running_mean.numpy().copy()
bn.eval()
bn(mg.tensor(np.zeros((2, 4))))
save["bn_after_eval_forward"] = bn_model[1].running_mean.numpy()

# 5. unused parameters: an error naming them, or handled with find_unused_parameters=True
model = mlp(seed=0, extra=True)
ddp = dist.DistributedDataParallel(model)
x, y = shard(data(0), rank)
try:
    loss_fn(ddp, x, y).backward()
except dist.DistributedError as e:
    info["unused_error"] = str(e)
model = mlp(seed=0, extra=True)
ddp = dist.DistributedDataParallel(model, find_unused_parameters=True)
loss_fn(ddp, x, y).backward()
save["unused.0.weight"] = model.net[0].weight.grad.numpy()

# 6. ranks wrapping different models
try:
    dist.DistributedDataParallel(mlp(seed=0, hidden=8 + rank))
except dist.DistributedError as e:
    info["mismatch_error"] = str(e)

np.savez(os.path.join(out, f"rank{rank}.npz"), **save)
with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
    json.dump(info, f)
dist.destroy_process_group()
