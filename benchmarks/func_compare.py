"""minigrad.func against torch.func on the same inputs: values equal, and jacrev / jacfwd / vmap timed side by side.

    cd benchmarks && PYTHONPATH=.. ../.venv-bench/bin/python func_compare.py [--cpu-time] [--repeat 5]
    (make bench builds .venv-bench; PYTHONPATH picks this tree's minigrad over an installed one)

Values: grad, grad_and_value, vjp, jvp, jacrev, jacfwd, hessian and vmap (per-example gradients of an MLP)
on float64 inputs, compared with torch.func to 1e-10 (the script exits non-zero on a mismatch).
Timings (medians of interleaved blocks, one thread each): the Jacobian of tanh(W x) for W of (m, n) by
reverse and by forward mode, and per-example gradients by vmap against a Python loop. minigrad's jacrev and
jacfwd take one pass per row / column (a Python loop of vjps / jvps); torch.func batches them with vmap
over the basis (one pass), so the ratio grows with the size: that is the point of the table.
"""
import argparse
import sys
import time

from common import interleaved_medians, pin_threads, table, try_import_torch

pin_threads(1)
import numpy as np  # noqa: E402

import minigrad as mg  # noqa: E402
from minigrad import func as mf  # noqa: E402


def values(torch, tf):
    """(name, max |minigrad - torch|) for every transform, on the same float64 inputs."""
    rng = np.random.default_rng(0)
    W, x, v = rng.standard_normal((5, 4)), rng.standard_normal(4), rng.standard_normal(4)
    u = rng.standard_normal(5)
    M, T = (lambda a: mg.tensor(a)), (lambda a: torch.tensor(a))

    def f(lib, w):
        return lambda z: (w @ z).tanh() * z.sum()

    def s(lib, w):
        return lambda z: ((w @ z).tanh() ** 2).sum() + (z ** 3).sum()
    Wm, Wt = M(W), T(W)
    out = []

    def diff(name, a, b):
        a = a if isinstance(a, (tuple, list)) else (a,)
        b = b if isinstance(b, (tuple, list)) else (b,)
        out.append((name, max(float(np.abs(np.asarray(p.numpy()) - q.detach().numpy()).max()) for p, q in zip(a, b))))
    diff("grad", mf.grad(s(mg, Wm))(M(x)), tf.grad(s(torch, Wt))(T(x)))
    gm, vm = mf.grad_and_value(s(mg, Wm))(M(x))
    gt, vt = tf.grad_and_value(s(torch, Wt))(T(x))
    diff("grad_and_value", (gm, vm), (gt, vt))
    diff("vjp", mf.vjp(f(mg, Wm), M(x))[1](M(u)), tf.vjp(f(torch, Wt), T(x))[1](T(u)))
    diff("jvp", mf.jvp(f(mg, Wm), (M(x),), (M(v),)), tf.jvp(f(torch, Wt), (T(x),), (T(v),)))
    diff("jacrev", mf.jacrev(f(mg, Wm))(M(x)), tf.jacrev(f(torch, Wt))(T(x)))
    diff("jacfwd", mf.jacfwd(f(mg, Wm))(M(x)), tf.jacfwd(f(torch, Wt))(T(x)))
    diff("hessian", mf.hessian(s(mg, Wm))(M(x)), tf.hessian(s(torch, Wt))(T(x)))
    diff("jvp(grad) (HVP)", mf.jvp(mf.grad(s(mg, Wm)), (M(x),), (M(v),))[1],
         tf.jvp(tf.grad(s(torch, Wt)), (T(x),), (T(v),))[1])
    X, Y = rng.standard_normal((6, 3)), rng.standard_normal((6, 1))
    P = [rng.standard_normal((3, 4)), rng.standard_normal(4), rng.standard_normal((4, 1))]

    def loss(p, x, y):
        return ((((x @ p[0] + p[1]).tanh() @ p[2]) - y) ** 2).mean()
    diff("vmap(grad) per-example", mf.vmap(mf.grad(loss), in_dims=(None, 0, 0))(tuple(map(M, P)), M(X), M(Y)),
         tf.vmap(tf.grad(loss), in_dims=(None, 0, 0))(tuple(map(T, P)), T(X), T(Y)))
    A = rng.standard_normal((6, 4))
    diff("vmap(matmul + softmax)", mf.vmap(lambda a: (a @ Wm.T).softmax(-1))(M(A)),
         tf.vmap(lambda a: (a @ Wt.T).softmax(-1))(T(A)))
    return out


def timings(torch, tf, repeat, timer):
    rows = []
    m = 16
    for n in (4, 16, 64):
        rng = np.random.default_rng(n)
        W, x = rng.standard_normal((m, n)) / np.sqrt(n), rng.standard_normal(n)
        Wm, xm, Wt, xt = mg.tensor(W), mg.tensor(x), torch.tensor(W), torch.tensor(x)
        fm, ft = (lambda z: (Wm @ z).tanh()), (lambda z: (Wt @ z).tanh())
        for name, mfn, tfn in (("jacrev", mf.jacrev(fm), tf.jacrev(ft)), ("jacfwd", mf.jacfwd(fm), tf.jacfwd(ft))):
            a, b = interleaved_medians([lambda: mfn(xm), lambda: tfn(xt)], repeat=repeat, block=2, timer=timer)
            rows.append((f"{name} tanh(W x), W ({m}, {n})", f"{a * 1e3:.2f}", f"{b * 1e3:.2f}", f"{a / b:.1f}x"))
    X, Y = np.random.default_rng(1).standard_normal((128, 1, 16)), np.random.default_rng(2).standard_normal((128, 1, 1))
    P = [np.random.default_rng(3).standard_normal(s) for s in ((16, 32), (32,), (32, 1))]

    def loss(p, x, y):
        return ((((x @ p[0] + p[1]).tanh() @ p[2]) - y) ** 2).mean()
    Pm, Pt = tuple(map(mg.tensor, P)), tuple(map(torch.tensor, P))
    Xm, Ym, Xt, Yt = mg.tensor(X), mg.tensor(Y), torch.tensor(X), torch.tensor(Y)
    vm, vt = mf.vmap(mf.grad(loss), in_dims=(None, 0, 0)), tf.vmap(tf.grad(loss), in_dims=(None, 0, 0))
    a, b = interleaved_medians([lambda: vm(Pm, Xm, Ym), lambda: vt(Pt, Xt, Yt)], repeat=repeat, block=2, timer=timer)
    rows.append(("vmap(grad) MLP 16-32-1, batch 128", f"{a * 1e3:.2f}", f"{b * 1e3:.2f}", f"{a / b:.1f}x"))
    gm = mf.grad(loss)
    loop = lambda: [gm(Pm, Xm[i], Ym[i]) for i in range(128)]   # noqa: E731
    (c,) = interleaved_medians([loop], repeat=max(2, repeat // 2), block=1, timer=timer)
    rows.append(("  minigrad: a Python loop of grad instead", f"{c * 1e3:.2f}", "", f"vmap {c / a:.0f}x faster"))
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--cpu-time", action="store_true", help="time with process CPU time (loaded machines)")
    args = p.parse_args()
    torch = try_import_torch(1)
    if torch is None:
        sys.exit("func_compare.py needs PyTorch (make bench builds .venv-bench with it)")
    torch.set_default_dtype(torch.float64)
    import torch.func as tf
    vals = values(torch, tf)
    print(table([(n, f"{e:.1e}", "ok" if e < 1e-10 else "MISMATCH") for n, e in vals],
                ["transform", "max |minigrad - torch.func|", ""]))
    print()
    timer = time.process_time if args.cpu_time else time.perf_counter
    print(table(timings(torch, tf, args.repeat, timer), ["workload", "minigrad ms", "torch.func ms", "ratio"]))
    if any(e >= 1e-10 for _, e in vals):
        sys.exit(1)


if __name__ == "__main__":
    main()
