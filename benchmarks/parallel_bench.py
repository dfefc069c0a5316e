"""Sharded, tensor and pipeline parallelism on 2 CPU ranks (MPI, one BLAS thread each), and PyTorch's FSDP and
DDP over gloo side by side.

    .venv/bin/python benchmarks/parallel_bench.py [--steps 10] [--torch-python .venv-bench/bin/python]

Tables: (1) FSDP (ZeRO-3, ZeRO-2) vs DDP: per-rank memory at rest and peak (minigrad's pool) and median
step time, on 8 x Linear(512, 512) with Adam; PyTorch's DDP and FSDP on the same model report their step
time and the bytes of parameters + gradients + optimizer state each rank holds (CPU tensors have no
allocator statistics). (2) Tensor and pipeline parallelism: step time against one process and bytes per
rank per step. (3) The pipeline bubble measured from the timelines against (p-1)/(m+p-1), and stage 0's
peak activation memory, GPipe vs 1F1B. (4) DDP with fp16 compression and PowerSGD: bytes per step and
the loss after the run. Each configuration runs in one job started by minigrad.distributed.run.
"""
import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
WIDTH, DEPTH, BATCH = 512, 8, 32


def timed(step, steps, barrier):
    times = []
    for i in range(steps + 2):
        barrier()
        t0 = time.perf_counter()
        step()
        if i >= 2:
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def minigrad_worker(out, steps):
    import numpy as np
    import minigrad as mg
    import minigrad.distributed as dist
    import minigrad.memory as mem
    from minigrad import nn
    from minigrad.distributed.algorithms.ddp_comm_hooks import PowerSGDState, fp16_compress_hook, powerSGD_hook
    from minigrad.distributed.fsdp import FullyShardedDataParallel, ShardingStrategy
    from minigrad.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe
    from minigrad.distributed.tensor_parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    dist.init_process_group("mpi", timeout=300)
    rank, world = dist.get_rank(), dist.get_world_size()
    res = {}

    def stack():
        mg.manual_seed(0)
        return nn.Sequential(*[nn.Linear(WIDTH, WIDTH) for _ in range(DEPTH)])

    x = mg.randn(BATCH, WIDTH)
    for name in ("DDP", "ZeRO-2", "ZeRO-3"):  # 1. memory and time
        gc.collect()
        mem.enable()
        net = stack()
        wrapped = dist.DistributedDataParallel(net) if name == "DDP" else FullyShardedDataParallel(
            net, auto_wrap_policy={nn.Linear}, sharding_strategy=(ShardingStrategy.SHARD_GRAD_OP if name == "ZeRO-2"
                                                                   else ShardingStrategy.FULL_SHARD))
        opt = mg.optim.Adam(wrapped.parameters(), lr=1e-4)

        def step():
            opt.zero_grad()
            wrapped(x).square().mean().backward()
            opt.step()
        step()
        mem.reset_peak_memory_stats()
        t = timed(step, steps, dist.barrier)
        res[name] = {"steady": mem.memory_allocated(), "peak": mem.max_memory_allocated(), "step": t}
        del wrapped, net, opt
        gc.collect()
        mem.disable()
    res["param_bytes"] = DEPTH * (WIDTH * WIDTH + WIDTH) * 4

    def mlp():  # 2. tensor parallel: two column/row pairs
        mg.manual_seed(0)
        return nn.Sequential(nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(), nn.Linear(4 * WIDTH, WIDTH),
                             nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(), nn.Linear(4 * WIDTH, WIDTH))
    xb = mg.randn(64, WIDTH)
    for name in ("1 process", "TP"):
        net = mlp() if name == "1 process" else parallelize_module(
            mlp(), None, {"0": ColwiseParallel(), "2": RowwiseParallel(), "3": ColwiseParallel(), "5": RowwiseParallel()})
        opt = mg.optim.SGD(net.parameters(), lr=1e-3)

        def step():
            opt.zero_grad()
            net(xb).square().mean().backward()
            opt.step()
        dist.reset_comm_stats()
        t = timed(step, steps, dist.barrier)
        res[f"tp {name}"] = {"step": t, "bytes": sum(v["bytes"] for v in dist.comm_stats().values()) / (steps + 2)}

    def half(stage):  # 3. pipeline: each stage two Linear(512, 512)
        mg.manual_seed(stage)
        return nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.Tanh(), nn.Linear(WIDTH, WIDTH))
    xp, yp = mg.randn(256, WIDTH), mg.randn(256, WIDTH)
    loss = lambda o, t: (o - t).square().mean()  # noqa: E731
    one = nn.Sequential(half(0), half(1))
    opt1 = mg.optim.SGD(one.parameters(), lr=1e-3)

    def step1():
        opt1.zero_grad()
        loss(one(xp), yp).backward()
        opt1.step()
    res["pp 1 process"] = {"step": timed(step1, steps, dist.barrier)}
    for sched_cls in (ScheduleGPipe, Schedule1F1B):
        for m in (2, 4, 8):
            stage = PipelineStage(half(rank), rank, world)
            sched = sched_cls(stage, m, loss_fn=loss)
            opt = mg.optim.SGD(stage.submod.parameters(), lr=1e-3)

            def step():
                opt.zero_grad()
                sched.step(xp, target=yp) if rank == 0 else sched.step(target=yp)
                opt.step()
            dist.reset_comm_stats()
            t = timed(step, steps, dist.barrier)
            nbytes = sum(v["bytes"] for k, v in dist.comm_stats().items() if k == "send") / (steps + 2)
            mem.enable()
            base = mem.memory_allocated()
            mem.reset_peak_memory_stats()
            step()
            res[f"pp {sched_cls.__name__} m={m}"] = {"step": t, "bytes": nbytes, "timeline": stage.timeline,
                                                      "peak": mem.max_memory_allocated() - base}
            mem.disable()

    rng = np.random.default_rng(0)  # 4. compressed DDP on an MLP, the same data on every run
    W = rng.standard_normal((WIDTH, 10)) / WIDTH ** 0.5
    for name, hook, state in (("plain", None, None), ("fp16", fp16_compress_hook, None),
                              ("PowerSGD r=4", powerSGD_hook, PowerSGDState(None, 4, start_powerSGD_iter=10))):
        mg.manual_seed(0)
        net = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.Tanh(), nn.Linear(WIDTH, WIDTH), nn.Tanh(), nn.Linear(WIDTH, 10))
        ddp = dist.DistributedDataParallel(net)
        if hook is not None:
            ddp.register_comm_hook(state, hook)
        opt = mg.optim.SGD(net.parameters(), lr=0.05)
        times = []
        for i in range(60):
            xs = np.random.default_rng(1000 * i + rank).standard_normal((32, WIDTH)).astype(np.float32)
            opt.zero_grad()
            dist.reset_comm_stats()
            t0 = time.perf_counter()
            lv = (ddp(mg.tensor(xs)) - mg.tensor(xs @ W, dtype=mg.float32)).square().mean()
            lv.backward()
            opt.step()
            times.append(time.perf_counter() - t0)
        res[f"hook {name}"] = {"bytes": dist.comm_stats()["all_reduce"]["bytes"], "loss": lv.item(),
                               "step": statistics.median(times[10:])}
    with open(os.path.join(out, f"mg{rank}.json"), "w") as f:
        json.dump(res, f)
    dist.destroy_process_group()


def torch_worker(out, steps):
    import torch
    import torch.distributed as tdist
    from torch.distributed.fsdp import FullyShardedDataParallel, ShardingStrategy
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy
    torch.set_num_threads(1)
    tdist.init_process_group("gloo")
    res = {}
    x = torch.randn(BATCH, WIDTH)
    for name in ("DDP", "ZeRO-2", "ZeRO-3"):
        torch.manual_seed(0)
        net = torch.nn.Sequential(*[torch.nn.Linear(WIDTH, WIDTH) for _ in range(DEPTH)])
        if name == "DDP":
            wrapped = torch.nn.parallel.DistributedDataParallel(net)
        else:
            wrapped = FullyShardedDataParallel(net, auto_wrap_policy=ModuleWrapPolicy({torch.nn.Linear}),
                                               device_id=torch.device("cpu"),
                                               sharding_strategy=(ShardingStrategy.SHARD_GRAD_OP if name == "ZeRO-2"
                                                                  else ShardingStrategy.FULL_SHARD))
        opt = torch.optim.Adam(wrapped.parameters(), lr=1e-4)

        def step():
            opt.zero_grad()
            wrapped(x).square().mean().backward()
            opt.step()
        t = timed(step, steps, tdist.barrier)
        held = sum(p.numel() * p.element_size() * (2 if p.grad is not None else 1) for p in wrapped.parameters())
        held += sum(v.numel() * v.element_size() for s in opt.state.values() for v in s.values()
                    if torch.is_tensor(v) and v.ndim > 0)
        res[name] = {"step": t, "held": held}
    if tdist.get_rank() == 0:
        with open(os.path.join(out, "torch0.json"), "w") as f:
            json.dump(res, f)
    tdist.destroy_process_group()


def run(cmd):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


def table(head, rows):
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for row in rows:
        print("| " + " | ".join("-" if v is None else f"{v:.3g}" if isinstance(v, float) else str(v) for v in row) + " |")
    print()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--torch-python", default=os.path.join(REPO, ".venv-bench", "bin", "python"))
    p.add_argument("--worker", choices=("minigrad", "torch"))
    p.add_argument("--out")
    args = p.parse_args()
    if args.worker == "minigrad":
        return minigrad_worker(args.out, args.steps)
    if args.worker == "torch":
        return torch_worker(args.out, args.steps)
    out = tempfile.mkdtemp(prefix="parallel_bench_")
    run([sys.executable, "-m", "minigrad.distributed.run", "--nproc-per-node", "2", __file__, "--worker", "minigrad",
         "--out", out, "--steps", str(args.steps)])
    mg = [json.load(open(os.path.join(out, f"mg{r}.json"))) for r in range(2)]
    pt = None
    if os.path.exists(args.torch_python):
        run([args.torch_python, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
             "--master-port", "29517", __file__, "--worker", "torch", "--out", out, "--steps", str(args.steps)])
        pt = json.load(open(os.path.join(out, "torch0.json")))
    r0, P = mg[0], mg[0]["param_bytes"]
    print(f"1. {DEPTH} x Linear({WIDTH}, {WIDTH}) float32, Adam, batch {BATCH} per rank, 2 ranks; P = {P:,} bytes of "
          f"parameters (DDP holds 4P: parameters, gradients, two moments)\n")
    table(("strategy", "minigrad at rest / P", "minigrad peak / P", "minigrad step ms", "PyTorch held / P",
           "PyTorch step ms"),
          [(k, r0[k]["steady"] / P, r0[k]["peak"] / P, r0[k]["step"] * 1e3, pt and pt[k]["held"] / P,
            pt and pt[k]["step"] * 1e3) for k in ("DDP", "ZeRO-2", "ZeRO-3")])
    print("2. Tensor and pipeline parallelism, step time against one process\n")
    rows = [("TP MLP (2 column/row pairs), batch 64", r0["tp 1 process"]["step"] * 1e3, r0["tp TP"]["step"] * 1e3,
             r0["tp 1 process"]["step"] / r0["tp TP"]["step"], r0["tp TP"]["bytes"])]
    for key in ("ScheduleGPipe m=4", "Schedule1F1B m=4"):
        rows.append((f"PP 2 stages, {key}, batch 256", r0["pp 1 process"]["step"] * 1e3, r0[f"pp {key}"]["step"] * 1e3,
                     r0["pp 1 process"]["step"] / r0[f"pp {key}"]["step"], r0[f"pp {key}"]["bytes"]))
    table(("run", "1 process ms", "2 ranks ms", "speed-up", "bytes sent / rank / step"), rows)
    print("3. The pipeline bubble, 2 stages: measured from the timelines vs (p-1)/(m+p-1); stage 0's peak "
          "activation memory\n")
    from minigrad.distributed.pipelining import bubble_fraction
    rows = []
    for m in (2, 4, 8):
        for sched in ("ScheduleGPipe", "Schedule1F1B"):
            key = f"pp {sched} m={m}"
            rows.append((sched, m, bubble_fraction([g[key]["timeline"] for g in mg]), 1 / (m + 1),
                         mg[0][key]["peak"] / 2 ** 20))
    table(("schedule", "m", "bubble measured", "bubble theory", "stage 0 peak MiB"), rows)
    print("4. DDP communication hooks on an MLP (512-512-512-10), 60 steps\n")
    plain = r0["hook plain"]["bytes"]
    table(("hook", "bytes / step", "ratio to plain", "final loss (rank 0)", "step ms"),
          [(k, r0[f"hook {k}"]["bytes"], plain / r0[f"hook {k}"]["bytes"], r0[f"hook {k}"]["loss"],
            r0[f"hook {k}"]["step"] * 1e3) for k in ("plain", "fp16", "PowerSGD r=4")])


if __name__ == "__main__":
    main()
