"""GPU training steps: minigrad on CuPy vs PyTorch CUDA (issue 4; run by `make gpu-check`).

    python3 benchmarks/gpu_bench.py [--repeat 20] [--quick]

Same workloads as benchmarks/train_step.py (MLP 784-1024-1024-10 b=256 SGD; pre-norm transformer block
d=256 h=4 L=128 b=16), timed with a device synchronize after each step; medians after warm-up.
Goal: minigrad reaches ≥ 0.5× PyTorch's speed. Also runs on the NumPy-backed emulator
(MINIGRAD_EMULATE_CUDA=1) as a smoke test of the code path, where the numbers mean nothing.
"""
import argparse
import sys

from common import median_time, table
from train_step import minigrad_block, minigrad_mlp, torch_block, torch_mlp

import minigrad as mg


def synced(step, sync):
    def run():
        step()
        sync()
    return run


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--quick", action="store_true", help="tiny repeat count (smoke test)")
    args = p.parse_args(argv)
    repeat = 2 if args.quick else args.repeat
    if not mg.cuda.is_available():
        sys.exit("gpu_bench: no CUDA device (set MINIGRAD_EMULATE_CUDA=1 for a smoke run)")
    sync_mg = lambda: mg.cuda.synchronize()  # noqa: E731
    try:
        import torch
        has_torch = torch.cuda.is_available()
    except ImportError:
        has_torch = False
    rows = []
    cases = [("MLP step (784-1024-1024-10, b=256)", lambda: minigrad_mlp(256, device="cuda")[0],
              lambda: torch_mlp(torch, 256, device="cuda")),
             ("Transformer block (d=256, h=4, L=128, b=16)", lambda: minigrad_block(device="cuda"),
              lambda: torch_block(torch, device="cuda"))]
    for name, make_mg, make_pt in cases:
        t_mg = median_time(synced(make_mg(), sync_mg), repeat, warmup=3)
        rows.append([name, "minigrad (CuPy)", f"{t_mg * 1e3:.3f}"])
        if has_torch:
            t_pt = median_time(synced(make_pt(), torch.cuda.synchronize), repeat, warmup=3)
            rows.append(["", f"PyTorch {torch.__version__} CUDA", f"{t_pt * 1e3:.3f}"])
            rows.append(["", "speed vs PyTorch (goal >= 0.5)", f"{t_pt / t_mg:.2f}x"])
    kind = "emulated (NumPy) - numbers meaningless" if mg.cuda.is_emulated() else "real GPU"
    print(f"GPU training steps on {kind}, median of {repeat}")
    print(table(rows, ["workload", "implementation", "ms / step"]))


if __name__ == "__main__":
    main()
