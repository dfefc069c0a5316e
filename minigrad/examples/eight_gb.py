"""The 8 GB card's three tasks, trained under a memory budget that minigrad fits the run into by itself.

    python -m minigrad.examples.eight_gb --task digits                # the default: float32, whole batch
    python -m minigrad.examples.eight_gb --task images --budget 0.5   # half the default's peak
    python -m minigrad.examples.eight_gb --task co2 --budget 24MiB --epochs 40

The tasks of the course's source, with real data that ships inside packages (no download):

=========  ===================================================  ==========  =====  =====================
task       model                                                parameters  batch  data
=========  ===================================================  ==========  =====  =====================
digits     MLP 64-1024-1024-128-10                              1.25 M      128    8x8 digits (sklearn)
images     CNN: 2 x (conv 3x3, batch norm, ReLU, pool), 2 FC    4.9 M       64     digits upscaled 32x32
co2        MLP on 104 weeks -> the next 4 weeks                 0.82 M      256    Mauna Loa CO2 (statsmodels)
=========  ===================================================  ==========  =====  =====================

``--budget`` is a byte count (``48MiB``) or a fraction of the default's predicted peak (``0.7``).
``plan_training`` picks autocast / recomputation / micro-batches, the run trains with the memory pool's
limit set to the budget (so a wrong prediction would fail with ``OutOfMemoryError``), and the summary
prints the plan's table, predicted beside measured, and the validation metrics. ``TASKS`` holds each
task's model and data so that ``benchmarks/eight_gb.py`` trains the very same models in PyTorch.
"""
import argparse
import gc
import math
import time
from collections import namedtuple

import numpy as np

import minigrad as mg
import minigrad.memory as mem
from minigrad import nn
from minigrad.budget import plan_training
from minigrad.datasets import load_co2_windows, load_digits_arrays
from minigrad.nn import functional as F

Task = namedtuple("Task", "name batch lr epochs build data loss metric")


def digits_mlp():
    return nn.Sequential(nn.Linear(64, 1024), nn.ReLU(), nn.Dropout(0.2), nn.Linear(1024, 1024), nn.ReLU(),
                         nn.Dropout(0.2), nn.Linear(1024, 128), nn.ReLU(), nn.Linear(128, 10))


def image_cnn():
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(64 * 8 * 8, 1190), nn.ReLU(), nn.Dropout(0.3),
                         nn.Linear(1190, 10))


def co2_mlp():
    return nn.Sequential(nn.Linear(104, 768), nn.GELU(), nn.Linear(768, 768), nn.GELU(), nn.Linear(768, 192),
                         nn.GELU(), nn.Linear(192, 4))


def digits_data():
    (x, y), (xv, yv) = load_digits_arrays("train", flatten=True), load_digits_arrays("test", flatten=True)
    return x, y, xv, yv


def upscale(images, factor=4):
    """8x8 -> 32x32 by bilinear interpolation (smooth strokes, not blocks), float32."""
    n, c, h, w = images.shape
    pos = lambda size: np.clip((np.arange(size * factor) + 0.5) / factor - 0.5, 0, size - 1)  # noqa: E731
    ys, xs = pos(h), pos(w)
    y0, x0 = np.floor(ys).astype(int), np.floor(xs).astype(int)
    y1, x1 = np.minimum(y0 + 1, h - 1), np.minimum(x0 + 1, w - 1)
    fy, fx = (ys - y0)[:, None], (xs - x0)[None, :]
    a, b = images[:, :, y0][:, :, :, x0], images[:, :, y0][:, :, :, x1]
    c_, d = images[:, :, y1][:, :, :, x0], images[:, :, y1][:, :, :, x1]
    out = (a * (1 - fx) + b * fx) * (1 - fy) + (c_ * (1 - fx) + d * fx) * fy
    return np.ascontiguousarray(out, dtype=np.float32)


def image_data():
    (x, y), (xv, yv) = load_digits_arrays("train"), load_digits_arrays("test")
    return upscale(x), y, upscale(xv), yv


def co2_data():
    x, y, _ = load_co2_windows("train")
    xv, yv, _ = load_co2_windows("val")
    return x, y, xv, yv


def accuracy(out, y):
    return float((out.argmax(axis=1) == y).mean())


TASKS = {
    "digits": Task("digits", 128, 1e-3, 20, digits_mlp, digits_data, "cross_entropy", accuracy),
    "images": Task("images", 64, 1e-3, 6, image_cnn, image_data, "cross_entropy", accuracy),
    "co2": Task("co2", 256, 1e-3, 60, co2_mlp, co2_data, "mse_loss", None),
}


def batches(n, batch, epoch, seed):
    """The shuffled full batches of one epoch (the same for every framework: NumPy's generator)."""
    order = np.random.default_rng(seed * 1000 + epoch).permutation(n)
    return [order[i:i + batch] for i in range(0, n - batch + 1, batch)]


def evaluate(model, task, xv, yv, chunk=128):
    """(validation loss, metric) in eval mode without a graph."""
    model.eval()
    outs = []
    with mg.no_grad():
        for i in range(0, len(xv), chunk):
            outs.append(model(mg.tensor(xv[i:i + chunk])).numpy())
    model.train()
    out = np.concatenate(outs)
    loss = getattr(F, task.loss)(mg.tensor(out), mg.tensor(yv)).item()
    return loss, (task.metric(out, yv) if task.metric else None)


def parse_budget(text):
    """'48MiB', '3e7' (bytes) or '0.7' (a fraction of the default's peak): (bytes or None, fraction or None)."""
    units = {"KiB": 2 ** 10, "MiB": 2 ** 20, "GiB": 2 ** 30, "KB": 1e3, "MB": 1e6, "GB": 1e9}
    for u, f in units.items():
        if text.endswith(u):
            return int(float(text[:-len(u)]) * f), None
    value = float(text)
    return (None, value) if value <= 1.0 else (int(value), None)


def train(task, *, budget=None, fraction=None, epochs=None, seed=0, device="cpu", log=print, limit=True,
          on_planned=None, on_trained=None):
    """Train ``task`` (a name or a ``Task``) under ``budget`` bytes (or ``fraction`` of the default's
    predicted peak; neither: the default, float32 whole batch). The pool is enabled and, with ``limit``,
    capped at the budget (tight); ``on_planned()`` is called when planning and the two measured first steps
    (whose memory history is instrumentation, not training) are over, and ``on_trained()`` when training
    ends, before the evaluation (the benchmark counts in between). Returns a dict: the plan, its
    measurement (first steps), validation loss and
    metric, seconds per step (median), and the pool's peaks over the whole run."""
    task = TASKS[task] if isinstance(task, str) else task
    epochs = task.epochs if epochs is None else epochs
    x, y, xv, yv = task.data()
    mem.enable(device)
    mg.manual_seed(seed)
    model = task.build().to(device)
    opt = mg.optim.AdamW(model.parameters(), lr=task.lr, weight_decay=1e-2)
    loss_fn = getattr(F, task.loss)
    xb, yb = x[:task.batch], y[:task.batch]
    plan = plan_training(model, opt, loss_fn, xb, yb, budget=2 ** 62, device=device)   # every option's peak
    if budget is None and fraction is None:                     # the default: float32, whole batch
        plan = plan.with_choice(plan.baseline.choice)
        budget = plan.predicted.peak_reserved
    else:
        budget = int(plan.baseline.peak_reserved * fraction) if budget is None else budget
        plan = plan.with_budget(budget)
    step = plan.step()
    if limit:
        mem.set_memory_limit(budget, device, tight=True)     # the pool the prediction replays
    try:
        gc.collect()
        mem.empty_cache(device)
        first = batches(len(x), task.batch, 0, seed)[:2]    # the first two steps, measured in detail
        measured = plan.measure(None, None, step=step, batches=[(x[i], y[i]) for i in first])
        gc.collect()                                        # the measurement's memory history is gone
        if on_planned is not None:
            on_planned()
        times, losses = [], []
        for epoch in range(epochs):
            for idx in batches(len(x), task.batch, epoch, seed)[2 if epoch == 0 else 0:]:
                t0 = time.perf_counter()
                losses.append(step(x[idx], y[idx]))
                times.append(time.perf_counter() - t0)
    finally:
        mem.set_memory_limit(None, device)
    if on_trained is not None:
        on_trained()
    peak_reserved, peak_allocated = mem.max_memory_reserved(device), mem.max_memory_allocated(device)
    val_loss, metric = evaluate(model, task, xv, yv)           # after training: not under the budget
    result = {"task": task.name, "params": sum(p.numel() for p in model.parameters()), "budget": budget,
              "choice": plan.choice.describe(task.batch), "plan": plan, "measured": measured,
              "val_loss": val_loss, "metric": metric, "train_loss": float(np.mean(losses[-10:])),
              "step_s": float(np.median(times)), "steps": len(times),
              "peak_reserved": peak_reserved, "peak_allocated": peak_allocated}
    if not math.isfinite(val_loss):
        raise RuntimeError(f"{task.name}: training diverged (validation loss {val_loss})")
    log(f"{task.name}: {result['params']:,} parameters, batch {task.batch}, budget {mem.format_bytes(budget)}: "
        f"{result['choice']}; validation loss {val_loss:.4f}" + (f", accuracy {metric:.1%}" if metric else "")
        + f"; {result['step_s'] * 1e3:.1f} ms/step; pool peak reserved {mem.format_bytes(result['peak_reserved'])}")
    return result


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", choices=sorted(TASKS), default="digits")
    p.add_argument("--budget", default=None, help="bytes (48MiB) or a fraction of the default's peak (0.7)")
    p.add_argument("--epochs", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    a = p.parse_args(argv)
    budget, fraction = parse_budget(a.budget) if a.budget else (None, None)
    r = train(a.task, budget=budget, fraction=fraction, epochs=a.epochs, seed=a.seed, device=a.device)
    print()
    print(r["plan"].explain(r["measured"]))
    return r


if __name__ == "__main__":
    main()
