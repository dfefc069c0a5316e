"""GPU check of issue 15 (run by `make gpu-check`): the fusion pass's CuPy kernels and flash attention on a
real CUDA device, against the eager ops on the same device and against cpu; then attention peak memory
from minigrad's pool (every CuPy allocation goes through it) vs sequence length.

    python3 benchmarks/gpu_compile_check.py [--lengths 256,1024,4096,8192]

Also runs on the NumPy-backed emulator (MINIGRAD_EMULATE_CUDA=1) as a smoke test of the code path.
Exits non-zero when a check fails.
"""
import argparse
import sys
import time

import numpy as np

import minigrad as mg
import minigrad.memory as mem
import minigrad.nn.functional as F
from minigrad.compiler import fused_kernels

CHAINS = {
    "gelu+norm": lambda x, b: (0.5 * x * (1.0 + (0.7978845608 * (x + 0.044715 * x ** 3.0)).tanh()) - b) * 1.5,
    "activations": lambda x, b: F.silu(F.sigmoid(F.relu(x) + b)) * F.gelu(x, approximate="tanh"),
    "select": lambda x, b: mg.where(b > 0, mg.maximum(x, b), mg.minimum(x, b)).clamp(-0.5, 0.8).exp(),
}


def check_fusion(dev):
    ok = True
    rng = np.random.default_rng(0)
    for dtype, tol in ((mg.float32, 2e-5), (mg.float64, 1e-11)):
        for name, fn in CHAINS.items():
            xh, bh = rng.standard_normal((256, 300)), rng.standard_normal(300)
            x = mg.tensor(xh, dtype=dtype, device=dev, requires_grad=True)
            b = mg.tensor(bh, dtype=dtype, device=dev, requires_grad=True)
            c = mg.compile(fn)
            c(x, b)
            n_kernels = len(fused_kernels(c.graphs()[0]))
            out = c(x, b)
            out.sum().backward()
            g_fused = [x.grad.cpu().numpy().copy(), b.grad.cpu().numpy().copy()]
            x.grad = b.grad = None
            want = fn(x, b)
            want.sum().backward()
            errs = [np.abs(out.detach().cpu().numpy() - want.detach().cpu().numpy()).max()] + \
                [np.abs(g - t.grad.cpu().numpy()).max() / (np.abs(t.grad.cpu().numpy()).max() + 1e-30)
                 for g, t in zip(g_fused, (x, b))]
            good = n_kernels >= 1 and max(errs) < tol * 10
            ok &= good
            print(f"fused {name:12s} {dtype}: {n_kernels} kernel(s), max err value/grads {errs[0]:.2e} "
                  f"{errs[1]:.2e} {errs[2]:.2e}  {'ok' if good else 'FAIL'}")
    return ok


def check_flash(dev):
    q, k, v = (mg.randn(4, 300, 32, device=dev, dtype=mg.float64, requires_grad=True) for _ in range(3))
    ok = True
    for causal in (False, True):
        res = []
        for use_flash in (False, True):
            for t in (q, k, v):
                t.grad = None
            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, use_flash=use_flash)
            (out * out.detach()).sum().backward()
            res.append([out.detach().cpu().numpy()] + [t.grad.cpu().numpy() for t in (q, k, v)])
        err = max(np.abs(a - b).max() for a, b in zip(*res))
        ok &= err < 1e-10
        print(f"flash attention causal={causal}: max err vs naive (values, grads) {err:.2e}  "
              f"{'ok' if err < 1e-10 else 'FAIL'}")
    return ok


def memory_vs_length(dev, lengths):
    mem.enable(dev)
    rows = []
    for L in lengths:
        row = [L]
        for use_flash in (False, True):
            q, k, v = (mg.randn(8, L, 64, device=dev, requires_grad=True) for _ in range(3))
            mg.cuda.synchronize()
            mem.reset_peak_memory_stats(dev)
            base = mem.memory_allocated(dev)
            t0 = time.perf_counter()
            try:
                F.scaled_dot_product_attention(q, k, v, use_flash=use_flash).sum().backward()
                mg.cuda.synchronize()
                row += [(mem.max_memory_allocated(dev) - base) / 2**20, (time.perf_counter() - t0) * 1e3]
            except mg.OutOfMemoryError:
                row += [float("nan"), float("nan")]
            del q, k, v
        rows.append(row)
    print("attention fwd+bwd (8, L, 64) float32: L, naive peak MiB, naive ms, flash peak MiB, flash ms, "
          "flash/naive peak")
    for L, pn, tn, pf, tf in rows:
        print(f"  {L:6d} {pn:10.1f} {tn:9.1f} {pf:10.1f} {tf:9.1f}   {pf / pn:.3f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lengths", default="256,1024,4096,8192")
    args = ap.parse_args()
    if not mg.cuda.is_available():
        sys.exit("gpu_compile_check: no CUDA device (MINIGRAD_EMULATE_CUDA=1 for a smoke run)")
    dev = mg.device("cuda")
    ok = check_fusion(dev) & check_flash(dev)
    memory_vs_length(dev, [int(x) for x in args.lengths.split(",")])
    print("gpu_compile_check:", "ok" if ok else "FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
