"""Issue 24's tutorial idioms on minigrad and on PyTorch, side by side: values and gradients on random inputs.

    PYTHONPATH=. /work/main/.venv-bench/bin/python benchmarks/idioms_compare.py

For each case the same float64 inputs (float32 where the dtype is the point) go through both frameworks; the
gradient is that of sum(out * r) for a fixed random r. Prints the largest absolute difference of the values and
of every input's gradient, and exits non-zero when one exceeds the case's tolerance (1e-10 in float64 unless
noted). Integer results (nonzero, unique, bincount...) must be equal.
"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # this tree's minigrad
import torch  # noqa: E402

import minigrad as mg  # noqa: E402

R = np.random.default_rng(0)
ROWS, FAILED = [], []


def _arr(x):
    return x.detach().numpy() if isinstance(x, torch.Tensor) else x.detach().numpy() if isinstance(x, mg.Tensor) else np.asarray(x)


def case(name, fn, arrays, grad=True, tol=1e-10, dtype="float64", ints=()):
    """``fn(lib, *tensors)`` with lib = torch or minigrad; arrays at positions ``ints`` are integer inputs."""
    outs, grads = {}, {}
    for lib in (torch, mg):
        ts = [lib.tensor(a) if i in ints else lib.tensor(a.astype(dtype), requires_grad=grad)
              for i, a in enumerate(arrays)]
        out = fn(lib, *ts)
        out = out if isinstance(out, tuple) else (out,)
        outs[lib] = [_arr(o) for o in out]
        if grad:
            total = sum((o * lib.tensor(np.random.default_rng(1).standard_normal(tuple(o.shape)).astype(dtype))).sum()
                        for o in out if o.dtype.is_floating_point if lib is torch) if lib is torch else \
                sum((o * lib.tensor(np.random.default_rng(1).standard_normal(tuple(o.shape)).astype(dtype))).sum()
                    for o in out if o.dtype in (mg.float32, mg.float64))
            total.backward()
            grads[lib] = [_arr(t.grad) if t.grad is not None else None for i, t in enumerate(ts) if i not in ints]
    vd = max(float(np.abs(a.astype(np.float64) - b.astype(np.float64)).max()) if a.size else 0.0
             if a.shape == b.shape else np.inf for a, b in zip(outs[torch], outs[mg]))
    gd = 0.0
    if grad:
        for a, b in zip(grads[torch], grads[mg]):
            if (a is None) != (b is None):
                gd = np.inf
            elif a is not None:
                gd = max(gd, float(np.abs(a - b).max()) if a.shape == b.shape else np.inf)
    ok = vd <= tol and gd <= tol
    ROWS.append((name, vd, gd if grad else None, ok))
    if not ok:
        FAILED.append(name)


def rnd(*shape):
    return R.standard_normal(shape)


def main():
    for eq, shapes in [("ij,jk->ik", [(3, 4), (4, 5)]), ("ij,jk", [(3, 4), (4, 5)]), ("ii->i", [(4, 4)]), ("ii", [(4, 4)]),
                       ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("...ij,...jk->...ik", [(2, 3, 4), (4, 5)]),
                       ("i,j->ij", [(3,), (4,)]), ("iij->j", [(3, 3, 2)]), ("ij,ij,ij->i", [(2, 3)] * 3)]:
        case(f"einsum {eq}", lambda lib, *t, eq=eq: lib.einsum(eq, *t), [rnd(*s) for s in shapes])
    case("einsum list form", lambda lib, a, b: lib.einsum("ij,jk", [a, b]), [rnd(2, 3), rnd(3, 2)])
    x = rnd(3, 4) * 2
    case("erf", lambda lib, a: lib.erf(a), [x], tol=1e-15)
    case("erfc", lambda lib, a: lib.erfc(a), [x], tol=1e-15)
    case("special.erf", lambda lib, a: lib.special.erf(a), [x], tol=1e-15)
    case("erf float32", lambda lib, a: lib.erf(a), [x], tol=2e-6, dtype="float32")
    case("atan2", lambda lib, a, b: lib.atan2(a, b), [rnd(3, 4), rnd(4)])
    case("arctan2 (method)", lambda lib, a, b: a.arctan2(b), [rnd(3, 4), rnd(3, 4)])
    case("lerp scalar weight", lambda lib, a, b: lib.lerp(a, b, 0.3), [rnd(3, 4), rnd(3, 4)])
    case("lerp tensor weight", lambda lib, a, b, w: a.lerp(b, w), [rnd(3, 4), rnd(3, 4), R.uniform(0, 1, (4,))])
    case("isclose", lambda lib, a, b: lib.isclose(a, b, rtol=1e-3, atol=1e-2).double(),
         [x, x + R.uniform(-0.05, 0.05, x.shape)], grad=False)
    for k in (-1, 0, 2):
        case(f"diag 1-D k={k}", lambda lib, a, k=k: lib.diag(a, k), [rnd(4)])
        case(f"diag 2-D k={k}", lambda lib, a, k=k: lib.diag(a, k), [rnd(3, 5)])
    case("diagonal offset=1 dims (2, 0)", lambda lib, a: lib.diagonal(a, 1, 2, 0), [rnd(3, 4, 5)])
    case("trace", lambda lib, a: lib.trace(a), [rnd(4, 3)])
    case("outer", lambda lib, a, b: lib.outer(a, b), [rnd(3), rnd(4)])
    case("ger", lambda lib, a, b: a.ger(b), [rnd(3), rnd(4)])
    case("addmm beta/alpha", lambda lib, i, a, b: lib.addmm(i, a, b, beta=0.5, alpha=2.0), [rnd(3, 5), rnd(3, 4), rnd(4, 5)])
    case("baddbmm beta/alpha", lambda lib, i, a, b: lib.baddbmm(i, a, b, beta=0.3, alpha=1.5),
         [rnd(2, 3, 5), rnd(2, 3, 4), rnd(2, 4, 5)])
    for kw in ({}, {"correction": 0}, {"unbiased": False}, {"dim": 1, "keepdim": True}):
        case(f"var_mean {kw}", lambda lib, a, kw=kw: lib.var_mean(a, **kw), [rnd(3, 5)])
        case(f"std_mean {kw}", lambda lib, a, kw=kw: lib.std_mean(a, **kw), [rnd(3, 5)])
    idx = np.array([2, 0, 2, 1])
    case("index_select", lambda lib, a, i: lib.index_select(a, 1, i), [rnd(3, 4), idx], ints=(1,))
    sidx = np.array([[0, 1, 2, 0], [2, 0, 1, 1]])
    case("scatter src", lambda lib, a, i, s: lib.scatter(a, 0, i, s), [rnd(3, 4), sidx, rnd(2, 4)], ints=(1,))
    case("scatter src larger than index", lambda lib, a, i, s: lib.scatter(a, 0, i, s), [rnd(3, 4), sidx, rnd(2, 5)],
         ints=(1,), grad=False)   # PyTorch has no gradient for src.shape != index.shape
    case("scatter value", lambda lib, a, i: a.scatter(0, i, 2.5), [rnd(3, 4), sidx], ints=(1,))
    case("scatter reduce=add", lambda lib, a, i, s: a.scatter(1, i, s, reduce="add"),
         [rnd(2, 4), np.array([[0, 0, 3], [1, 1, 1]]), rnd(2, 3)], ints=(1,), grad=False)
    case("scatter_ (in place)", lambda lib, a, i: lib.zeros(2, 4, dtype=a.dtype).scatter_(1, i, a),
         [rnd(2, 1), np.array([[1], [3]])], ints=(1,), grad=False)
    case("repeat_interleave int", lambda lib, a: lib.repeat_interleave(a, 2, dim=1), [rnd(2, 3)])
    case("repeat_interleave tensor", lambda lib, a, r: a.repeat_interleave(r, dim=0), [rnd(3, 2), np.array([1, 0, 3])],
         ints=(1,))
    case("repeat_interleave dim=None", lambda lib, a: lib.repeat_interleave(a, 3), [rnd(2, 2)])
    z = (R.random((4, 5)) > 0.6) * 1.0
    case("nonzero", lambda lib, a: lib.nonzero(a), [z], grad=False)
    case("nonzero as_tuple", lambda lib, a: lib.nonzero(a, as_tuple=True), [z], grad=False)
    ints = R.integers(0, 6, 20)
    case("unique inverse counts", lambda lib, a: lib.unique(a, return_inverse=True, return_counts=True), [ints],
         ints=(0,), grad=False)
    rows = R.integers(0, 2, (6, 3))
    case("unique dim=0", lambda lib, a: lib.unique(a, dim=0, return_inverse=True), [rows], ints=(0,), grad=False)
    case("bincount", lambda lib, a: lib.bincount(a, minlength=9), [ints], ints=(0,), grad=False)
    case("bincount weights", lambda lib, a, w: lib.bincount(a, weights=w), [ints, rnd(20)], ints=(0,), grad=False)
    case("fill_diagonal_ wrap", lambda lib, a: (a * 1).fill_diagonal_(0.5, wrap=True), [rnd(7, 3)])
    case("fill_diagonal_", lambda lib, a: (a * 1).fill_diagonal_(-1.0), [rnd(3, 5)])
    img, line = rnd(2, 3, 5, 7), rnd(2, 3, 6)
    F = {torch: torch.nn.functional, mg: mg.nn.functional}
    for kw in (dict(scale_factor=2), dict(size=(8, 3)), dict(scale_factor=1.7), dict(size=(9, 11), mode="nearest-exact"),
               dict(size=(8, 13), mode="bilinear"), dict(size=(8, 13), mode="bilinear", align_corners=True),
               dict(scale_factor=0.6, mode="bilinear"), dict(scale_factor=2.5, mode="bilinear", align_corners=True),
               dict(size=(3, 4), mode="area")):
        case(f"interpolate 4-D {kw}", lambda lib, a, kw=kw: F[lib].interpolate(a, **kw), [img])
    for kw in (dict(scale_factor=2, mode="bilinear"), dict(size=(8, 13), mode="bilinear", align_corners=True)):
        case(f"interpolate 4-D float32 {kw}", lambda lib, a, kw=kw: F[lib].interpolate(a, **kw), [img], tol=1e-5,
             dtype="float32")
    for kw in (dict(scale_factor=3), dict(size=10, mode="linear"), dict(size=4, mode="linear", align_corners=True),
               dict(scale_factor=1.5, mode="linear")):
        case(f"interpolate 3-D {kw}", lambda lib, a, kw=kw: F[lib].interpolate(a, **kw), [line])
    case("nn.Upsample bilinear x2", lambda lib, a: lib.nn.Upsample(scale_factor=2, mode="bilinear")(a), [img])
    for s, p, op, g, d in [(1, 0, 0, 1, 1), (2, 1, 1, 1, 1), ((2, 1), (0, 1), (1, 0), 2, (1, 2)), (3, 2, 2, 1, 2)]:
        case(f"conv_transpose2d s={s} p={p} op={op} g={g} d={d}",
             lambda lib, x, w, b, a=(s, p, op, g, d): F[lib].conv_transpose2d(x, w, b, *a),
             [rnd(2, 4, 4, 5), rnd(4, 3, 3, 2), rnd(3 * g)])
    case("conv_transpose2d unbatched", lambda lib, x, w: F[lib].conv_transpose2d(x, w, stride=2), [rnd(4, 3, 3), rnd(4, 2, 2, 2)])
    case("conv_transpose2d float32", lambda lib, x, w: F[lib].conv_transpose2d(x, w, stride=2, padding=1),
         [rnd(2, 4, 5, 5), rnd(4, 3, 3, 3)], tol=1e-5, dtype="float32")

    def module(lib, x, w, b):
        m = lib.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2).double()
        with lib.no_grad():
            m.weight.copy_(w)
            m.bias.copy_(b)
        return m(x) + m(x, output_size=(9, 9)).sum()
    case("nn.ConvTranspose2d (+ output_size)", module, [rnd(2, 4, 5, 5), rnd(4, 3, 3, 3), rnd(6)], grad=False)
    _strings()
    print(f"{'case':<58} {'max |value diff|':>17} {'max |grad diff|':>16}")
    for name, vd, gd, ok in ROWS:
        print(f"{name:<58} {vd:>17.2e} {'-' if gd is None else f'{gd:.2e}':>16}{'' if ok else '   MISMATCH'}")
    print(f"{len(ROWS)} cases, {len(FAILED)} mismatches" + (f": {FAILED}" if FAILED else ""))
    return 1 if FAILED else 0


def _strings():
    """set_printoptions, Tensor(3, 4), default dtype: printed strings and dtypes equal."""
    x = np.array([1.23456, 2.5, 100.0, 1e-5])
    for opts in (dict(precision=2), dict(sci_mode=False), dict(sci_mode=True, precision=3), dict(profile="short"),
                 dict(threshold=5, edgeitems=2)):
        got = []
        for lib in (torch, mg):
            lib.set_printoptions(**opts)
            got.append(repr(lib.tensor(x, dtype=lib.float32)).replace("torch.", "").replace("minigrad.", "")
                       + repr(lib.arange(10)))
            lib.set_printoptions(profile="default")
        ok = got[0] == got[1]
        ROWS.append((f"set_printoptions {opts}", 0.0 if ok else np.inf, None, ok))
        if not ok:
            FAILED.append(f"set_printoptions {opts}: {got}")
    same = []
    for lib in (torch, mg):
        lib.set_default_dtype(lib.float64)
        same.append((str(lib.tensor([1.0]).dtype).split(".")[-1], str(lib.Tensor(3, 4).dtype).split(".")[-1],
                     tuple(lib.Tensor(3, 4).shape), str((lib.tensor([1, 2]) / 2).dtype).split(".")[-1]))
        lib.set_default_dtype(lib.float32)
        same.append((str(lib.Tensor([1, 2]).dtype).split(".")[-1], tuple(lib.FloatTensor(2, 2).shape)))
    ok = same[:2] == same[2:]
    ROWS.append(("set_default_dtype(float64), Tensor(3, 4), Tensor([1, 2])", 0.0 if ok else np.inf, None, ok))
    if not ok:
        FAILED.append(f"default dtype: {same}")


if __name__ == "__main__":
    sys.exit(main())
