"""The 8 GB card's table: peak training memory and step time, PyTorch's default beside minigrad under a budget.

For each task of ``minigrad/examples/eight_gb.py`` (digits MLP 1.25 M parameters @128, image CNN 4.9 M @64,
CO2 predictor 0.8 M @256), one process per run trains the same model from the same initial weights on the
same batches with AdamW:

* **PyTorch default**: float32, no recomputation, whole batch;
* **minigrad** at its own default, and under budgets of 100 %, 70 % and 50 % of PyTorch's default peak,
  where ``plan_training`` picks autocast / recomputation / micro-batches and the pool's limit is set.

**How memory is measured, the same way for both frameworks.** Every run is a fresh process started with
``LD_PRELOAD=libmemcount.so`` (``benchmarks/memcount/memcount.c``, built here with ``cc``): it counts the
C heap's live bytes at ``malloc_usable_size`` through malloc/calloc/realloc/posix_memalign/aligned_alloc
and their frees, and keeps the peak. That one door is where both get tensor memory on CPU: NumPy's array
data (hence minigrad's pool segments, and the temporaries NumPy makes inside an op) and PyTorch's CPU
allocator (``posix_memalign``). The peak is taken from just before the model is built to the end of
training, minus the live bytes at that start (the interpreter, the libraries, the data set), and
includes whatever the framework holds: minigrad's whole reserved pool, PyTorch's cached buffers. The pool's
budget for a target is the target less what the default run held outside the pool (NumPy's temporaries
inside ops, an op's result before the pool takes it over); when nothing fits that, the whole target (another
plan holds other temporaries: a micro-batch few); when a budgeted run's heap goes over the target, it is run
again with the pool's budget lowered by the excess (at most three runs; ``attempts`` in the JSON); when the
lower budget fits nothing, the run that trained is reported, its peak over the target. Why not
the frameworks' own counters: PyTorch keeps none on CPU (``torch.cuda.max_memory_allocated`` is for
CUDA), and minigrad's pool does not see NumPy's temporaries. The pool's own peak is printed beside it.

    python benchmarks/eight_gb.py                 # all three tasks (minutes)
    python benchmarks/eight_gb.py --quick         # one short epoch each (the smoke test)
    python benchmarks/eight_gb.py --tasks co2 --json results/eight_gb.json
    python benchmarks/eight_gb.py --from-json results/eight_gb.json   # the table in the source's layout again
"""
import argparse
import ctypes
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from common import pin_threads, table  # noqa: E402

THREADS = int(os.environ.get("BENCH_THREADS", "2"))
pin_threads(THREADS)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FRACTIONS = (1.0, 0.7, 0.5)


def build_memcount(out_dir=os.path.join(ROOT, "build", "memcount")):
    os.makedirs(out_dir, exist_ok=True)
    lib, src = os.path.join(out_dir, "libmemcount.so"), os.path.join(HERE, "memcount", "memcount.c")
    if not os.path.exists(lib) or os.path.getmtime(lib) < os.path.getmtime(src):
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", lib, src, "-ldl"], check=True)
    return lib


class Counter:
    """The preloaded counters (zeros when not preloaded)."""

    def __init__(self):
        lib = ctypes.CDLL(None)
        self.ok = hasattr(lib, "memcount_live")
        if self.ok:
            lib.memcount_live.restype = lib.memcount_peak.restype = ctypes.c_long
            self.lib = lib

    def live(self):
        return self.lib.memcount_live() if self.ok else 0

    def peak(self):
        return self.lib.memcount_peak() if self.ok else 0

    def reset(self):
        if self.ok:
            self.lib.memcount_reset_peak()


# --- the runs (each in its own process) ----------------------------------------------------------------
def run_torch(task, epochs, seed):
    import numpy as np
    import torch
    from minigrad.examples import eight_gb as tasks
    torch.set_num_threads(THREADS)
    t = tasks.TASKS[task]
    x, y, xv, yv = t.data()
    counter = Counter()
    import minigrad as mg
    mg.manual_seed(seed)
    reference = t.build()                                    # the same initial weights as minigrad's run
    loss_fn = getattr(torch.nn.functional, t.loss)
    warm_up(to_torch(reference, torch), torch, loss_fn, x[:2], y[:2], t.lr)
    start = counter.live()
    counter.reset()
    model = to_torch(reference, torch)
    del reference
    opt = torch.optim.AdamW(model.parameters(), lr=t.lr, weight_decay=1e-2)
    times = []
    for epoch in range(epochs):
        for idx in tasks.batches(len(x), t.batch, epoch, seed):
            t0 = time.perf_counter()
            xb, yb = torch.from_numpy(x[idx]), torch.from_numpy(y[idx])
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
            loss.item()
            times.append(time.perf_counter() - t0)
    peak = counter.peak() - start
    model.eval()
    with torch.no_grad():
        out = torch.cat([model(torch.from_numpy(xv[i:i + 512])) for i in range(0, len(xv), 512)])
        val_loss = loss_fn(out, torch.from_numpy(yv)).item()
    metric = t.metric(out.numpy(), yv) if t.metric else None
    return {"peak": peak, "pool_reserved": None, "step_s": float(np.median(times)), "val_loss": val_loss,
            "metric": metric, "choice": "float32, no recomputation, whole batch", "steps": len(times),
            "params": sum(p.numel() for p in model.parameters()), "batch": t.batch}


def warm_up(model, torch, loss_fn, x, y, lr):
    """Two training steps of a throwaway copy on two samples, before counting starts: PyTorch's one-time
    set-up (thread pools, kernel caches) is no more training memory than minigrad's planning probes
    (two-sample steps on a copy, also before counting)."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    for _ in range(2):
        opt.zero_grad(set_to_none=True)
        loss_fn(model(torch.from_numpy(x)), torch.from_numpy(y)).backward()
        opt.step()


def to_torch(model, torch):
    """A torch.nn.Sequential with the same layers and weights as a minigrad Sequential."""
    tnn, layers = torch.nn, []
    for m in model.children():
        kind = type(m).__name__
        if kind == "Linear":
            layer = tnn.Linear(m.in_features, m.out_features)
        elif kind == "Conv2d":
            layer = tnn.Conv2d(m.in_channels, m.out_channels, m.kernel_size, m.stride, m.padding)
        elif kind == "BatchNorm2d":
            layer = tnn.BatchNorm2d(m.num_features, eps=m.eps, momentum=m.momentum)
        elif kind == "Dropout":
            layer = tnn.Dropout(m.p)
        elif kind == "MaxPool2d":
            layer = tnn.MaxPool2d(m.kernel_size, m.stride)
        elif kind == "GELU":
            layer = tnn.GELU(approximate=m.approximate)
        else:
            layer = getattr(tnn, kind)()
        params = dict(m.named_parameters(recurse=False))
        with torch.no_grad():
            for name, p in layer.named_parameters(recurse=False):
                p.copy_(torch.from_numpy(params[name].detach().numpy().copy()))
        layers.append(layer)
    return tnn.Sequential(*layers)


def run_minigrad(task, epochs, seed, budget):
    import minigrad.memory as mem
    from minigrad.examples import eight_gb as tasks
    counter = Counter()
    t = tasks.TASKS[task]
    t.data()                                                 # loaded (and cached) before the start
    start = counter.live()
    marks = {}
    from minigrad.budget import BudgetError
    try:
        r = tasks.train(task, budget=budget, epochs=epochs, seed=seed, log=lambda s: None,
                        on_planned=counter.reset, on_trained=lambda: marks.setdefault("peak", counter.peak()))
    except BudgetError as e:
        return {"error": str(e)}
    return {"peak": marks["peak"] - start, "pool_reserved": r["peak_reserved"], "step_s": r["step_s"],
            "val_loss": r["val_loss"], "metric": r["metric"], "choice": r["choice"], "steps": r["steps"],
            "budget": r["budget"], "predicted_reserved": r["plan"].predicted.peak_reserved,
            "measured_reserved_first_steps": r["measured"].peak_reserved, "pool_format": mem.format_bytes(0)}


# --- the driver ----------------------------------------------------------------------------------------
def child(args):
    kind, task, epochs, seed, budget = args.child
    epochs, seed = int(epochs), int(seed)
    out = run_torch(task, epochs, seed) if kind == "torch" else \
        run_minigrad(task, epochs, seed, None if budget == "default" else int(budget))
    print("RESULT " + json.dumps(out))


def spawn(lib, kind, task, epochs, seed, budget="default"):
    env = dict(os.environ, LD_PRELOAD=lib, PYTHONPATH=ROOT)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", kind, task, str(epochs), str(seed), str(budget)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    if p.returncode != 0 or not lines:
        return {"error": (p.stderr.strip().splitlines() or ["failed"])[-1],
                "budget": None if budget == "default" else budget}
    return dict(json.loads(lines[-1][7:]), budget=None if budget == "default" else budget)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", default="digits,images,co2")
    p.add_argument("--quick", action="store_true", help="one epoch per run")
    p.add_argument("--fractions", default=",".join(map(str, FRACTIONS)), help="budgets, fractions of PyTorch's peak")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="also write the results here")
    p.add_argument("--markdown", default=None, help="also write the table in the source's layout here")
    p.add_argument("--from-json", default=None, help="only print the tables of results saved with --json")
    p.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        return child(a)
    if a.from_json:
        with open(a.from_json) as f:
            results = json.load(f)
        print(markdown(results))
        return results
    results = measure(a)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(markdown(results) + "\n")
    return results


def markdown(results):
    """The source's layout: per task, PyTorch's default beside minigrad at its default and under 100 %, 70 %
    and 50 % of PyTorch's peak (heap peaks in MiB, median step times, validation loss / accuracy)."""
    mib = lambda n: f"{n / 2**20:.1f}"  # noqa: E731
    def val(r):
        return f"{r['val_loss']:.4f}" + (f" / {r['metric']:.1%}" if r.get("metric") is not None else "")
    out = ["| task | params | batch | PyTorch peak MiB | PyTorch ms/step | PyTorch val loss / acc | minigrad run "
           "| budget MiB | peak MiB (vs PyTorch) | ms/step | speed vs PyTorch | val loss / acc | what ran |",
           "|" + " --- |" * 13]
    for task, runs in results.items():
        ref = runs["PyTorch default"]
        if "peak" not in ref:
            out.append(f"| {task} | | | failed: {ref.get('error', '')[:60]} |" + " |" * 9)
            continue
        first = [task, f"{ref.get('params', 0) / 1e6:.2f} M", str(ref.get("batch", "")), mib(ref["peak"]),
                 f"{ref['step_s'] * 1e3:.1f}", val(ref)]
        for name, r in runs.items():
            if name == "PyTorch default":
                continue
            cells = first if first else [""] * 6
            first = None
            budget = "-" if r.get("target") is None else mib(r["target"])
            if "error" in r:
                missing = r["error"].split(" missing")[0].rsplit(", ", 1)[-1] if "missing" in r["error"] else ""
                cells += [name.replace("minigrad ", ""), budget,
                          "does not fit" + (f" ({missing} missing)" if missing else ""), "-", "-", "-", ""]
            else:
                cells += [name.replace("minigrad ", ""), budget, f"{mib(r['peak'])} ({r['peak'] / ref['peak']:.2f})",
                          f"{r['step_s'] * 1e3:.1f}", f"{ref['step_s'] / r['step_s']:.2f}x", val(r), r["choice"]]
            out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def measure(a):
    from minigrad.examples.eight_gb import TASKS
    lib = build_memcount()
    mib = lambda n: "-" if n is None else f"{n / 2**20:.1f}"  # noqa: E731
    rows, results = [], {}
    for task in a.tasks.split(","):
        epochs = 1 if a.quick else TASKS[task].epochs
        ref = spawn(lib, "torch", task, epochs, a.seed)
        mine = spawn(lib, "minigrad", task, epochs, a.seed)
        runs = {"PyTorch default": ref, "minigrad default": mine}
        if "peak" in ref and "peak" in mine:
            # the budget caps the pool; what minigrad holds outside it (NumPy's temporaries inside ops, the
            # optimizer's one temporary) is taken from the default run and left free
            outside = max(mine["peak"] - mine["pool_reserved"], 0)
            for f in [float(s) for s in a.fractions.split(",")]:
                target = int(ref["peak"] * f)
                budget, trained = max(target - outside, 1), None
                for attempt in range(1, 4):
                    r = spawn(lib, "minigrad", task, epochs, a.seed, budget)
                    if "peak" not in r and trained is not None:
                        r = trained          # the pool's lower budget fits nothing: the run that trained, over
                        break
                    trained = r if "peak" in r else trained
                    if "peak" not in r and budget < target and attempt == 1:
                        budget = target      # nothing fits: the default's temporaries may not be this plan's
                        continue
                    if "peak" not in r or r["peak"] <= target:
                        break
                    # another plan holds other temporaries outside the pool: the heap went over by this
                    # much, so the pool gets that much less (at most three runs)
                    budget = max(budget - (r["peak"] - target), 1)
                runs[f"minigrad @ {f:.0%}"] = dict(r, target=target, attempts=attempt)
        results[task] = runs
        if a.json:                                   # written as each task ends: a long run keeps what it did
            os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
            with open(a.json, "w") as f:
                json.dump(results, f, indent=1)
        for name, r in runs.items():
            if "error" in r:
                missing = r["error"].split(" missing")[0].rsplit(", ", 1)[-1] if "missing" in r["error"] else ""
                rows.append((task, name, mib(r.get("target")), mib(r.get("budget")), "-", "-", "-", "-", "-",
                             f"does not fit ({missing} missing)" if missing else "failed: " + r["error"][:70]))
                continue
            rows.append((task, name, mib(r.get("target")), mib(r.get("budget")), mib(r["peak"]), mib(r["pool_reserved"]),
                         f"{r['peak'] / ref['peak']:.2f}", f"{ref['step_s'] / r['step_s']:.2f}x",
                         f"{r['val_loss']:.4f}" + (f" / {r['metric']:.1%}" if r["metric"] is not None else ""),
                         r["choice"]))
    print(table(rows, ["task", "run", "target MiB", "pool budget MiB", "peak MiB", "pool peak MiB",
                       "memory vs PyTorch", "speed vs PyTorch", "val loss / acc", "what ran"]))
    print()
    print(markdown(results))
    return results


if __name__ == "__main__":
    main()
