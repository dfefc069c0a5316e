"""Weak scaling of DDP on CPU with MPI: 1 vs 2 ranks (one BLAS thread each), same batch per rank.

    .venv/bin/python benchmarks/ddp_scaling.py [--steps 20] [--torch-python .venv-bench/bin/python]

Per model (the MLP and the tiny GPT) and world size it prints the median step time, the weak-scaling
efficiency t(1) / t(N), the bytes each rank handed to all-reduce per step next to the ring all-reduce's
cost 2(N-1)/N x gradient bytes, and the fraction of communication time hidden behind backward, with
DDP's buckets and with one all-reduce after backward. PyTorch DDP (gloo) runs the same MLP with torchrun
when ``--torch-python`` has torch. Each configuration is one job started by minigrad.distributed.run.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
MLP = (784, 256, 256, 10)


def hidden_fraction(timeline):
    """Share of all-reduce time (issue to completion) that falls inside backward."""
    bwd = next(e for e in timeline if e["kind"] == "backward")
    total = hidden = 0.0
    for e in timeline:
        if e["kind"] == "all_reduce":
            total += e["completed"] - e["issued"]
            hidden += max(0.0, min(e["completed"], bwd["end"]) - max(e["issued"], bwd["start"]))
    return hidden / total if total else 0.0


def minigrad_worker(model_name, steps, batch):
    import numpy as np
    import minigrad as mg
    import minigrad.distributed as dist
    from minigrad import nn
    dist.init_process_group("mpi", timeout=120)
    rank, world = dist.get_rank(), dist.get_world_size()
    rng = np.random.default_rng(rank)
    if model_name == "mlp":
        layers = []
        for i, (a, b) in enumerate(zip(MLP, MLP[1:])):
            layers += [nn.Linear(a, b)] + ([nn.ReLU()] if i < len(MLP) - 2 else [])
        net = nn.Sequential(*layers)
        x, y = mg.tensor(rng.standard_normal((batch, MLP[0]), np.float32)), mg.tensor(rng.integers(0, 10, batch))
        loss_of = lambda m: nn.functional.cross_entropy(m(x), y)  # noqa: E731
    else:
        from minigrad.examples.tiny_gpt import TinyGPT, lm_loss
        net = TinyGPT(vocab_size=65, block_size=32)
        idx = mg.tensor(rng.integers(0, 65, (batch, 32)))
        tgt = mg.tensor(rng.integers(0, 65, (batch, 32)))
        loss_of = lambda m: lm_loss(m(idx), tgt)  # noqa: E731
    grad_bytes = sum(p.array.nbytes for p in net.parameters())
    result = {"model": model_name, "world": world, "grad_bytes": grad_bytes}
    for label, caps in (("buckets", {}), ("one", {"bucket_cap_mb": 1e6, "first_bucket_cap_mb": 1e6})):
        ddp = dist.DistributedDataParallel(net, **caps)
        opt = mg.optim.SGD(net.parameters(), lr=0.01)
        times, hidden = [], []
        for step in range(steps + 3):
            dist.barrier()
            dist.reset_comm_stats()
            t0 = time.perf_counter()
            opt.zero_grad()
            loss_of(ddp).backward()
            opt.step()
            if step >= 3:
                times.append(time.perf_counter() - t0)
                hidden.append(hidden_fraction(ddp.timeline))
                result["bytes_per_step"] = dist.comm_stats()["all_reduce"]["bytes"]
        result[f"step_{label}"] = statistics.median(times)
        result[f"hidden_{label}"] = statistics.median(hidden)
        result[f"buckets_{label}"] = len(ddp.buckets)
    if rank == 0:
        print("RESULT " + json.dumps(result), flush=True)
    dist.destroy_process_group()


def torch_worker(steps, batch):
    import torch
    import torch.distributed as tdist
    torch.set_num_threads(1)
    tdist.init_process_group("gloo")
    torch.manual_seed(0)
    layers = []
    for i, (a, b) in enumerate(zip(MLP, MLP[1:])):
        layers += [torch.nn.Linear(a, b)] + ([torch.nn.ReLU()] if i < len(MLP) - 2 else [])
    ddp = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(*layers))
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    x, y = torch.randn(batch, MLP[0]), torch.randint(0, 10, (batch,))
    times = []
    for step in range(steps + 3):
        tdist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad()
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()
        if step >= 3:
            times.append(time.perf_counter() - t0)
    if tdist.get_rank() == 0:
        print("RESULT " + json.dumps({"model": "mlp", "world": tdist.get_world_size(),
                                      "step_buckets": statistics.median(times)}), flush=True)
    tdist.destroy_process_group()


def run(cmd, env):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]), **env)
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch", type=int, default=64, help="per rank (the tiny GPT uses batch // 8)")
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--models", default="mlp,gpt")
    p.add_argument("--torch-python", default=os.path.join(REPO, ".venv-bench", "bin", "python"))
    p.add_argument("--worker", choices=("minigrad", "torch"))
    p.add_argument("--model", default="mlp")
    args = p.parse_args()
    if args.worker == "minigrad":
        return minigrad_worker(args.model, args.steps, args.batch if args.model == "mlp" else max(1, args.batch // 8))
    if args.worker == "torch":
        return torch_worker(args.steps, args.batch)
    rows = []
    for model in args.models.split(","):
        base = None
        for world in (1, args.world):
            r = run([sys.executable, "-m", "minigrad.distributed.run", "--nproc-per-node", str(world), __file__,
                     "--worker", "minigrad", "--model", model, "--steps", str(args.steps),
                     "--batch", str(args.batch)], {})
            base = base or r["step_buckets"]
            ring = 2 * (world - 1) / world * r["grad_bytes"]
            rows.append((f"minigrad {model}", world, r["step_buckets"] * 1e3, base / r["step_buckets"],
                         r["bytes_per_step"], ring, r["hidden_buckets"], r["hidden_one"], r["buckets_buckets"]))
    if os.path.exists(args.torch_python):
        base = None
        for world in (1, args.world):
            r = run([args.torch_python, "-m", "torch.distributed.run", "--nproc-per-node", str(world),
                     "--master-addr", "127.0.0.1", "--master-port", str(29400 + world), __file__,
                     "--worker", "torch", "--steps", str(args.steps), "--batch", str(args.batch)], {})
            base = base or r["step_buckets"]
            rows.append(("PyTorch mlp (gloo)", world, r["step_buckets"] * 1e3, base / r["step_buckets"],
                         None, None, None, None, None))
    head = ("run", "ranks", "step ms", "efficiency", "all-reduce B/rank/step", "ring 2(N-1)/N B",
            "hidden (buckets)", "hidden (one)", "buckets")
    print(" | ".join(head))
    for row in rows:
        print(" | ".join("-" if v is None else f"{v:.3g}" if isinstance(v, float) else str(v) for v in row))


if __name__ == "__main__":
    main()
