"""make gpu-check's kernel part (issue 29): every CUDA kernel minigrad generates, run on the GPU against NumPy.

    python3 benchmarks/gpu_kernel_check.py [--dtypes float32,float16,float64]

1. The kernel catalogue (minigrad/backend/cuda_kernels.py) through the ops and optimizers that launch it, on
   'cuda' against the same steps on 'cpu' (NumPy), in float32, float16 (computed in float32 by the wrappers,
   or the plain path for float16 parameters) and float64.
2. What CuPy compiled for those launches: every type binding the catalogue declares (which is what the NVRTC
   check, make test-cuda, compiles) should appear, none undeclared may, and CuPy's generated source must be
   the one tools/nvrtc_check.py builds for it (array layouts aside): the CPU-side model of CuPy is right.
3. The fusion pass: every op case of tools/nvrtc_check.py, compiled by mg.compile on 'cuda' (the generated
   CuPy kernels where ``cupy_supported``), forward and backward, against eager on 'cpu'.
Prints one line per check and exits 1 if any fails. On the NumPy emulator (MINIGRAD_EMULATE_CUDA=1) it runs
as a smoke test of itself: there are no CuPy kernels, so part 2 only reports that.
"""
import argparse
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import minigrad as mg  # noqa: E402
import minigrad.nn.functional as F  # noqa: E402
from minigrad import nn, optim  # noqa: E402
from tools import nvrtc_check  # noqa: E402

TOL = {"float16": dict(rtol=2e-2, atol=2e-3), "float32": dict(rtol=2e-4, atol=2e-5),
       "float64": dict(rtol=1e-9, atol=1e-11)}


def _x(shape, dt, device, seed=0, scale=1.0, grad=True):
    a = (np.random.default_rng(seed).standard_normal(shape) * scale).astype(dt)
    return mg.tensor(a, device=device, requires_grad=grad)


def _fwd_bwd(fn, dt, device, shape=(4, 33), scale=2.0):
    x = _x(shape, dt, device, scale=scale)
    y = fn(x)
    y.backward(_x(y.shape, dt, device, seed=1, grad=False))
    return [y.detach(), x.grad]


def _ce(dt, device):
    x = _x((6, 5), dt, device, scale=3.0)
    target = mg.tensor(np.array([0, 4, -100, 2, 1, 3]), device=device)
    loss = F.cross_entropy(x, target, label_smoothing=0.1)
    loss.backward()
    return [loss.detach(), x.grad]


def _train(make_opt, dt, device, steps=3):
    mg.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4)).to(device).to(getattr(mg, dt))
    opt = make_opt(model.parameters())
    x, y = _x((5, 8), dt, device, grad=False), _x((5, 4), dt, device, seed=2, grad=False)
    for _ in range(steps):
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()
    return [p.detach() for p in model.parameters()]


def _scaler(dt, device, plant_inf):
    mg.manual_seed(0)
    model = nn.Linear(8, 4).to(device).to(getattr(mg, dt))
    opt, scaler = optim.SGD(model.parameters(), lr=0.1), mg.amp.GradScaler(init_scale=1024.0)
    loss = F.mse_loss(model(_x((5, 8), dt, device, grad=False)), _x((5, 4), dt, device, seed=2, grad=False))
    scaler.scale(loss).backward()
    if plant_inf:
        model.bias.grad[0] = float("inf")
    scaler.step(opt)
    scaler.update()
    return [p.detach() for p in model.parameters()] + [mg.tensor(scaler.get_scale())]


def _master(dt, device):
    mg.manual_seed(0)
    model = nn.Linear(8, 4).to(device).to(getattr(mg, dt))
    mw = mg.amp.master_weights(model)
    opt, scaler = optim.SGD(mw.parameters(), lr=0.1), mg.amp.GradScaler(init_scale=256.0)
    x, y = _x((5, 8), dt, device, grad=False), _x((5, 4), dt, device, seed=2, grad=False)
    for _ in range(2):
        mw.zero_grad()
        scaler.scale(F.mse_loss(model(x).float(), y.float())).backward()
        mw.step(opt, scaler)
        scaler.update()
    return [p.detach() for p in model.parameters()] + [m.detach() for m in mw.parameters()]


def catalogue_cases():
    """(name, dtypes, fn(dtype, device) -> tensors) covering every kernel of the catalogue."""
    sgd = lambda **kw: lambda ps: optim.SGD(ps, lr=0.05, **kw)   # noqa: E731
    return [
        ("gelu (erf)", "float32 float16 float64", lambda dt, d: _fwd_bwd(lambda x: F.gelu(x), dt, d)),
        ("gelu (tanh)", "float32 float16 float64", lambda dt, d: _fwd_bwd(lambda x: F.gelu(x, approximate="tanh"),
                                                                        dt, d)),
        ("softmax dim=-1", "float32 float16 float64", lambda dt, d: _fwd_bwd(lambda x: F.softmax(x, dim=-1), dt, d)),
        ("log_softmax dim=0", "float32 float16 float64",
         lambda dt, d: _fwd_bwd(lambda x: F.log_softmax(x, dim=0), dt, d)),
        ("cross_entropy", "float32 float16 float64", _ce),
        ("SGD", "float32 float16 float64", lambda dt, d: _train(sgd(weight_decay=0.01), dt, d)),
        ("SGD momentum", "float32 float64", lambda dt, d: _train(sgd(momentum=0.9, dampening=0.1), dt, d)),
        ("SGD nesterov", "float32 float64", lambda dt, d: _train(sgd(momentum=0.9, nesterov=True), dt, d)),
        ("Adam", "float32 float64", lambda dt, d: _train(lambda ps: optim.Adam(ps, lr=0.01), dt, d)),
        ("AdamW", "float32 float64",
         lambda dt, d: _train(lambda ps: optim.AdamW(ps, lr=0.01, weight_decay=0.1), dt, d)),
        ("GradScaler unscale", "float32 float64", lambda dt, d: _scaler(dt, d, False)),
        ("GradScaler inf found", "float32 float64", lambda dt, d: _scaler(dt, d, True)),
        ("master weights", "float16 float32 float64", _master),
    ]


def compare(name, dt, fn, failures):
    try:
        cpu, cuda = fn(dt, "cpu"), fn(dt, "cuda")
        for a, b in zip(cpu, cuda):
            if b.device != "cuda" and b.ndim:   # (a scalar made on the host: the scaler's scale)
                raise AssertionError(f"result on {b.device}")
            np.testing.assert_allclose(b.numpy().astype(np.float64), a.numpy().astype(np.float64), **TOL[dt])
        print(f"ok    {name} {dt}")
    except Exception as e:   # a mismatch or an error in the kernel's launch
        print(f"FAIL  {name} {dt}: {type(e).__name__}: {str(e).strip()[:400]}")
        failures.append(f"{name} {dt}")


_LAYOUT = [(re.compile(r"CArray<([^,<>]+), \d+, \d, \d>"), r"CArray<\1, N, C, I>"),
           (re.compile(r"CIndexer<\d+, \d>"), "CIndexer<N, I>")]


def _without_layout(code):
    for pattern, repl in _LAYOUT:
        code = pattern.sub(repl, code)
    return code.strip()


def check_compiled_bindings(failures, kernels=None):
    """Part 2: the bindings CuPy compiled for the catalogue (default: cuda_kernels.KERNELS) against the
    declared ones, and CuPy's sources against ours."""
    if mg.cuda.is_emulated():
        print("skip  CuPy's compiled sources: the emulator runs no CuPy kernels")
        return
    from cupy._core import core
    if kernels is None:
        from minigrad.backend.cuda_kernels import KERNELS as kernels
    header = "".join(f"#include <{h}>\n" for h in core._cupy_header_list)
    for name, spec in kernels.items():
        if spec.kind != "elementwise":
            continue
        codes = spec.kernel._cached_codes   # {dtypes of the array arguments: source}, filled by CuPy's launches
        params = spec.kernel.in_params + spec.kernel.out_params
        declared = {}
        for binding in spec.types:
            key = tuple(np.dtype(p.dtype if p.dtype is not None else binding[p.ctype]) for p in params
                        if p.name not in spec.scalars)
            declared[key] = binding
        for key, code in codes.items():
            key = tuple(np.dtype(k) for k in key)
            if key not in declared:
                print(f"FAIL  {name}: CuPy compiled it for {[k.name for k in key]}, not a declared binding "
                      f"(make test-cuda never compiled it: add it to types=)")
                failures.append(f"{name} undeclared binding")
                continue
            ours = nvrtc_check.elementwise_source(spec.kernel, declared[key], spec.scalars, "contiguous", name)
            if _without_layout(ours.code[len(header):]) != _without_layout(code):
                print(f"FAIL  {name} {declared[key]}: CuPy's source differs from tools/nvrtc_check.py's")
                failures.append(f"{name} source")
            else:
                print(f"ok    {name} {declared[key]}: compiled by CuPy, source as the NVRTC check's")
        for key, binding in declared.items():
            if key not in {tuple(np.dtype(k) for k in c) for c in codes}:
                print(f"note  {name} {binding}: declared, not launched by these cases")


def check_fusion(dtypes, failures):
    """Part 3: each fusion case of the NVRTC check, compiled on 'cuda', against eager on 'cpu'."""
    from minigrad.compiler import fused_kernels
    for case, fn in nvrtc_check._fusion_cases().items():
        for dt in dtypes:
            def run(device, compiled):
                x = mg.tensor(np.linspace(0.1, 0.9, 6, dtype=dt).reshape(2, 3), device=device, requires_grad=True)
                y = mg.tensor(np.linspace(0.2, 0.7, 3, dtype=dt), device=device, requires_grad=True)
                c = mg.tensor(np.array([True, False, True]), device=device)
                f = mg.compile(fn) if compiled else fn
                out = f(x, y, c)
                out.backward(mg.ones(out.shape, device=device, dtype=out.dtype))
                kernels = [k for g in f.graphs() for k in fused_kernels(g)] if compiled else []
                return [out.detach(), x.grad, y.grad], kernels
            try:
                (want, _), (got, kernels) = run("cpu", False), run("cuda", True)
                if len(kernels) != 1:
                    raise AssertionError(f"expected one fused kernel, got {kernels}")
                for a, b in zip(want, got):
                    if (a is None) != (b is None):
                        raise AssertionError("a gradient is missing on one side")
                    if a is not None:
                        np.testing.assert_allclose(b.numpy().astype(np.float64), a.numpy().astype(np.float64),
                                                   **TOL[dt])
                how = ("NumPy blocks (emulator)" if mg.cuda.is_emulated() else "generated CuPy kernels"
                       if kernels[0].cupy_supported() else "CuPy array expressions")
                print(f"ok    fusion {case} {dt} ({how})")
            except Exception as e:
                print(f"FAIL  fusion {case} {dt}: {type(e).__name__}: {str(e).strip()[:400]}")
                failures.append(f"fusion {case} {dt}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtypes", default="float32,float16,float64")
    args = ap.parse_args(argv)
    if not mg.cuda.is_available():
        sys.exit("gpu_kernel_check: no CUDA device (MINIGRAD_EMULATE_CUDA=1 runs it on the emulator)")
    dtypes = args.dtypes.split(",")
    kind = "the NumPy emulator (smoke test)" if mg.cuda.is_emulated() else "a real GPU"
    print(f"== kernels on {kind}: cuda vs cpu, dtypes {', '.join(dtypes)}")
    failures = []
    for name, dts, fn in catalogue_cases():
        for dt in dts.split():
            if dt in dtypes:
                compare(name, dt, fn, failures)
    try:
        check_compiled_bindings(failures)
    except Exception as e:   # CuPy's internals differ from the version tools/nvrtc_check.py models (14.x)
        print(f"FAIL  CuPy's compiled sources: {type(e).__name__}: {str(e)[:300]}")
        failures.append("compiled sources")
    check_fusion(dtypes, failures)
    print(f"== {len(failures)} failed" + (": " + ", ".join(failures) if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
