"""Parallelism worker: ``parallel_train.py OUT`` on 2 ranks. Trains with every strategy and saves what the
test compares (OUT/rank{r}.npz, .json): tensor parallel (tiny GPT, MLP), FSDP ZeRO-3 / ZeRO-2 / mixed
precision, pipeline GPipe and 1F1B (MLP, tiny GPT), DDP with fp16 and PowerSGD hooks, the parameter server;
the communication logs; per-rank memory from the pool; and the errors for mismatched shapes and sizes."""
import gc
import json
import os
import sys

import numpy as np

import minigrad as mg
import minigrad.distributed as dist
import minigrad.memory as mem
from minigrad import nn
from minigrad.distributed.algorithms.ddp_comm_hooks import PowerSGDState, fp16_compress_hook, powerSGD_hook
from minigrad.distributed.fsdp import FullyShardedDataParallel as FSDP, MixedPrecision, ShardingStrategy
from minigrad.distributed.param_server import ParameterServer
from minigrad.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe
from minigrad.distributed.tensor_parallel import parallelize_module, vocab_parallel_cross_entropy
from parallel_models import (LR, STEPS, GPTStage, gpt, gpt_loss, gpt_plan, mlp, mlp_data, mse, rows_of, tokens)
from minigrad.distributed.tensor_parallel import ColwiseParallel, HeadwiseParallel, RowwiseParallel

out = sys.argv[1]
dist.init_process_group("mpi", timeout=30)
rank, world = dist.get_rank(), dist.get_world_size()
save, info = {}, {}


def keep(prefix, named):
    for n, p in named:
        save[f"{prefix}.{n}"] = (p.detach() if hasattr(p, "detach") else p).numpy().copy()


def log_ops():
    return [[r["op"], r["bytes"]] for r in dist.comm_log()]


def error(fn):
    try:
        fn()
    except Exception as e:  # the test reads the message
        return f"{type(e).__name__}: {e}"
    return "no error"


# 1. tensor parallel: every rank sees the whole batch, holds a slice of the weights
model = parallelize_module(gpt(), None, gpt_plan(loss_parallel=True))
opt = mg.optim.Adam(model.parameters(), lr=LR)
info["tp_losses"] = []
for step in range(STEPS):
    opt.zero_grad()
    x, y = tokens(step)
    dist.reset_comm_stats()
    loss = vocab_parallel_cross_entropy(model(mg.tensor(x)), mg.tensor(y))
    loss.backward()
    info["tp_log"] = log_ops()
    info["tp_losses"].append(loss.item())
    opt.step()
keep("tp", model.named_parameters())
model = parallelize_module(mlp(), None, {"0": ColwiseParallel(), "2": RowwiseParallel()})
opt = mg.optim.SGD(model.parameters(), lr=0.1)
for step in range(STEPS):
    opt.zero_grad()
    x, y = mlp_data(step)
    mse(model(mg.tensor(x)), mg.tensor(y)).backward()
    opt.step()
keep("tpmlp", model.named_parameters())

# 2. FSDP: each rank its rows of the batch; ZeRO-3 and ZeRO-2 on the GPT (a unit per block), one unit on the MLP
for name, strategy in (("fsdp3", ShardingStrategy.FULL_SHARD), ("fsdp2", ShardingStrategy.SHARD_GRAD_OP)):
    model = FSDP(gpt(seed=rank), sharding_strategy=strategy, auto_wrap_policy={nn.TransformerBlock})
    opt = mg.optim.Adam(model.parameters(), lr=LR)
    for step in range(STEPS):
        opt.zero_grad()
        x, y = rows_of(tokens(step), rank, world)
        dist.reset_comm_stats()
        gpt_loss(model(x), y).backward()
        info[f"{name}_log"] = log_ops()
        opt.step()
    keep(name, model.state_dict().items())
    info[f"{name}_shards"] = [int(p.numel()) for p in model.parameters()]
model = FSDP(mlp(seed=rank))
opt = mg.optim.SGD(model.parameters(), lr=0.1)
for step in range(STEPS):
    opt.zero_grad()
    mse(*[model(a) if i == 0 else a for i, a in enumerate(rows_of(mlp_data(step), rank, world))]).backward()
    opt.step()
keep("fsdpmlp", model.state_dict().items())
model = FSDP(mlp(seed=0).float(), mixed_precision=MixedPrecision(param_dtype=mg.float16))
opt = mg.optim.SGD(model.parameters(), lr=0.1)
info["mp_losses"] = []
for step in range(6):
    opt.zero_grad()
    x, y = (t.float() for t in rows_of(mlp_data(0), rank, world))
    dist.reset_comm_stats()
    loss = mse(model(x).float(), y)
    loss.backward()
    info["mp_losses"].append(loss.item())
    opt.step()
info["mp_log"] = log_ops()
info["mp_dtypes"] = [p.dtype.name for p in model.parameters()] + [p.grad.dtype.name for p in model.parameters()]
info["mp_state_dtypes"] = sorted({v.dtype.name for v in model.state_dict().values()})

# 3. per-rank memory (the pool): DDP vs ZeRO-3 vs ZeRO-2 on 4 Linear(64, 64) units, Adam
mem_rows = {}
for name in ("ddp", "zero3", "zero2"):
    gc.collect()
    mem.enable()
    mg.manual_seed(0)
    net = nn.Sequential(*[nn.Linear(64, 64) for _ in range(4)])
    wrapped = dist.DistributedDataParallel(net) if name == "ddp" else FSDP(
        net, auto_wrap_policy={nn.Linear},
        sharding_strategy=ShardingStrategy.FULL_SHARD if name == "zero3" else ShardingStrategy.SHARD_GRAD_OP)
    opt = mg.optim.Adam(wrapped.parameters(), lr=1e-3)
    x = mg.randn(2, 64)
    for step in range(2):
        opt.zero_grad()
        mem.reset_peak_memory_stats()
        wrapped(x).sum().backward()
        opt.step()
    mem_rows[name] = {"steady": mem.memory_allocated(), "peak": mem.max_memory_allocated()}
    del wrapped, net, opt
    gc.collect()
    mem.disable()
info["mem"] = mem_rows

# 4. pipeline: stage r holds its layers; GPipe and 1F1B, 4 micro-batches
for name, schedule in (("gpipe", ScheduleGPipe), ("1f1b", Schedule1F1B)):
    full = mlp()
    layers = list(full)[:3] if rank == 0 else list(full)[3:]
    stage = PipelineStage(nn.Sequential(*layers), rank, world)
    sched = schedule(stage, 4, loss_fn=mse)
    opt = mg.optim.SGD(stage.submod.parameters(), lr=0.1)
    for step in range(STEPS):
        opt.zero_grad()
        x, y = (mg.tensor(a) for a in mlp_data(step))
        sched.step(x, target=y) if rank == 0 else sched.step(target=y)
        opt.step()
    keep(f"pp_{name}", full.named_parameters())
    info[f"pp_{name}_order"] = [[e["action"], e["mb"]] for e in stage.timeline]
    stage = PipelineStage(GPTStage(gpt(), rank), rank, world)
    sched = schedule(stage, 2, loss_fn=gpt_loss)
    opt = mg.optim.Adam(stage.submod.parameters(), lr=LR)
    losses = []
    for step in range(STEPS):
        opt.zero_grad()
        x, y = (mg.tensor(a) for a in tokens(step))
        sched.step(x, target=y, losses=losses) if rank == 0 else sched.step(target=y, losses=losses)
        opt.step()
    keep(f"ppgpt_{name}", [(f"{i}", p) for i, p in enumerate(stage.submod.parameters())])
    info[f"ppgpt_{name}_losses"] = [l.item() for l in losses]
    mg.manual_seed(1)  # activation memory: 8 micro-batches of a wide stage
    wide = nn.Sequential(nn.Linear(64, 512), nn.Tanh(), nn.Linear(512, 64)) if rank == 0 else nn.Linear(64, 1)
    stage = PipelineStage(wide, rank, world)
    sched = schedule(stage, 8, loss_fn=lambda o, t: (o - t).pow(2).mean())
    mem.enable()
    x, y = mg.randn(64, 64), mg.randn(64, 1)
    base = mem.memory_allocated()
    mem.reset_peak_memory_stats()
    sched.step(x, target=y) if rank == 0 else sched.step(target=y)
    info[f"pp_{name}_peak"] = mem.max_memory_allocated() - base
    del stage, sched, wide
    gc.collect()
    mem.disable()

# 5. DDP communication hooks: bytes per step and the final loss
for name, hook, state in (("plain", None, None), ("fp16", fp16_compress_hook, None),
                          ("powersgd", powerSGD_hook, PowerSGDState(None, 1, start_powerSGD_iter=1))):
    net = mlp()
    ddp = dist.DistributedDataParallel(net)
    if hook is not None:
        ddp.register_comm_hook(state, hook)
    opt = mg.optim.SGD(net.parameters(), lr=0.1)
    losses = []
    for step in range(6):
        opt.zero_grad()
        x, y = rows_of(mlp_data(step % 2), rank, world)
        dist.reset_comm_stats()
        loss = mse(ddp(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    info[f"hook_{name}"] = {"bytes": dist.comm_stats()["all_reduce"]["bytes"], "losses": losses}
    keep(f"hook_{name}", net.named_parameters())

# 6. the parameter server: SGD through rank 0
net = mlp(seed=rank)
ps = ParameterServer(net, mg.optim.SGD(net.parameters(), lr=0.1) if rank == 0 else None)
dist.reset_comm_stats()
for step in range(STEPS):
    net.zero_grad()
    x, y = rows_of(mlp_data(step), rank, world)
    mse(net(x), y).backward()
    ps.step()
info["ps_stats"] = dist.comm_stats()
keep("ps", net.named_parameters())

# 7. clear errors for mismatched shapes and sizes
info["err_fsdp_models"] = error(lambda: FSDP(nn.Linear(4, 4 + rank)))
info["err_stages"] = error(lambda: PipelineStage(mlp(), rank, 3))
info["err_stage_index"] = error(lambda: PipelineStage(mlp(), 1 - rank, 2))
info["err_heads"] = error(lambda: parallelize_module(nn.MultiheadAttention(12, 3), None, HeadwiseParallel()))
info["err_split"] = error(lambda: parallelize_module(nn.Linear(4, 5), None, ColwiseParallel()))
info["err_style"] = error(lambda: parallelize_module(nn.Tanh(), None, ColwiseParallel()))
info["err_micro"] = error(lambda: ScheduleGPipe(PipelineStage(mlp(), rank, 2), 3, loss_fn=mse).step(
    mg.randn(8, 8), target=mg.randn(8, 3)) if rank == 0 else None)

np.savez(os.path.join(out, f"rank{rank}.npz"), **save)
with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
    json.dump(info, f)
dist.destroy_process_group()
