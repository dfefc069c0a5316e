"""Hybrid worker: ``hybrid_train.py OUT`` on 4 ranks, a 2 x 2 mesh. DP x TP: the tiny GPT tensor-parallel
inside each row of the mesh, DDP down each column; DP x PP: the MLP in two pipeline stages inside each row,
gradients averaged down each column. Then new_group with member lists that differ between ranks."""
import json
import os
import sys

import numpy as np

import minigrad as mg
import minigrad.distributed as dist
from minigrad.distributed.pipelining import PipelineStage, Schedule1F1B, average_gradients
from minigrad.distributed.tensor_parallel import parallelize_module, vocab_parallel_cross_entropy
from minigrad import nn
from parallel_models import LR, STEPS, gpt, gpt_plan, mlp, mlp_data, mse, rows_of, tokens

out = sys.argv[1]
dist.init_process_group("mpi", timeout=30)
rank = dist.get_rank()
save, info = {}, {}

mesh = dist.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
dp, tp = mesh["dp"].get_group(), mesh["tp"].get_group()
info["dp_ranks"], info["tp_ranks"] = dist.get_process_group_ranks(dp), dist.get_process_group_ranks(tp)
info["coordinate"] = mesh.get_coordinate()
model = parallelize_module(gpt(), mesh["tp"], gpt_plan(loss_parallel=True))
ddp = dist.DistributedDataParallel(model, process_group=dp)
opt = mg.optim.Adam(model.parameters(), lr=LR)
for step in range(STEPS):
    opt.zero_grad()
    x, y = rows_of(tokens(step), mesh.get_local_rank("dp"), 2)
    vocab_parallel_cross_entropy(ddp(x), y, group=tp).backward()
    opt.step()
for n, p in model.named_parameters():
    save[f"dptp.{n}"] = p.detach().numpy()
info["dptp_groups"] = sorted({r["group"] for r in dist.comm_log()})

mesh = dist.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "pp"))
pp, dp = mesh["pp"].get_group(), mesh["dp"].get_group()
full = mlp()
s = mesh.get_local_rank("pp")
stage = PipelineStage(nn.Sequential(*(list(full)[:3] if s == 0 else list(full)[3:])), s, 2, group=pp)
sched = Schedule1F1B(stage, 2, loss_fn=mse)
opt = mg.optim.SGD(stage.submod.parameters(), lr=0.1)
for step in range(STEPS):
    opt.zero_grad()
    x, y = rows_of(mlp_data(step), mesh.get_local_rank("dp"), 2)
    sched.step(x, target=y) if s == 0 else sched.step(target=y)
    average_gradients(stage.submod, dp)
    opt.step()
for n, p in full.named_parameters():
    save[f"dppp.{n}"] = p.detach().numpy()

try:  # ranks 0 and 1 disagree on the members of the next group
    dist.new_group([[0, 1], [0, 1, 2], [2, 3], [2, 3]][rank])
    info["mismatch"] = "no error"
except dist.DistributedError as e:
    info["mismatch"] = str(e)
np.savez(os.path.join(out, f"rank{rank}.npz"), **save)
with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
    json.dump(info, f)
dist.destroy_process_group()
