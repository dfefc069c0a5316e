"""Automatic mixed precision (issue 12): memory and step time of a training step, autocast vs float32.

    python benchmarks/amp_step.py [--device cpu|cuda] [--repeat 9] [--only memory,time] [--quick]
    PYTHONPATH=. /work/main/.venv-bench/bin/python benchmarks/amp_step.py      (side by side with PyTorch)

Workloads: the digits CNN (minigrad.examples.digits_cnn, 32 channels, batch 256, 8x8 images) and one
pre-norm transformer block of the tiny GPT (d=256, 4 heads, L=128, batch 16, GELU-tanh), SGD, one step =
forward under autocast, scaled backward, GradScaler step and update.

Memory, measured with minigrad's caching pool (deterministic bytes):
- saved activations = bytes allocated after the forward minus before it (what the graph keeps for
  backward, the float16 casts of the weights included). Goal <= 0.55x float32.
- total peak = max bytes allocated during the whole step (parameters, gradients, activations, temporaries).
  Goal <= 0.7x float32.
Time: medians, timed in alternating blocks; on CPU goal <= 1.3x float32, on GPU goal faster than float32,
with PyTorch's AMP (float16 on cuda, bfloat16 on cpu: its defaults) beside it when PyTorch is importable.
The floor on a NumPy device: the time an autocast step spends converting float16 <-> float32 (NumPy has
no float16 arithmetic; every conversion goes through ``minigrad.autograd.opmath.convert``, timed here),
and the step without it, against float32.
"""
import argparse
import contextlib
import sys
import time

from common import interleaved_medians, pin_threads, table

pin_threads(2)

import minigrad as mg  # noqa: E402
import minigrad.nn.functional as F  # noqa: E402
from minigrad import nn  # noqa: E402
from minigrad.examples.digits_cnn import build_cnn  # noqa: E402

MIB = 2 ** 20


def cnn_case(device, batch):
    mg.manual_seed(0)
    model = build_cnn(32, dropout=0.0).to(device)
    x, y = mg.randn(batch, 1, 8, 8, device=device), mg.randint(0, 10, (batch,), device=device)
    return model, lambda: F.cross_entropy(model(x), y)


def block_case(device, batch, seq=128, d=256, heads=4):
    mg.manual_seed(0)
    block = nn.TransformerBlock(d, heads, activation="gelu_tanh", causal=True).to(device)
    x, r = mg.randn(batch, seq, d, device=device), mg.randn(batch, seq, d, device=device)
    return block, lambda: (block(x) * r).mean()


def make_step(case, device, amp, batch):
    model, loss_fn = case(device, batch)
    opt = mg.optim.SGD(model.parameters(), lr=1e-3)
    scaler = mg.amp.GradScaler(enabled=amp)

    def forward():
        with mg.autocast(device_type=device.split(":")[0], enabled=amp):
            return loss_fn()

    def step():
        opt.zero_grad()
        loss = forward()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    return step, forward, opt


def measure_memory(case, device, amp, batch):
    mem = mg.memory
    with mem.enabled(device):
        step, forward, opt = make_step(case, device, amp, batch)
        step()                                  # steady state: gradients exist
        opt.zero_grad()
        mem.reset_peak_memory_stats(device)
        base = mem.memory_allocated(device)
        loss = forward()
        saved = mem.memory_allocated(device) - base
        del loss
        opt.zero_grad()
        mem.reset_peak_memory_stats(device)
        step()
        peak = mem.max_memory_allocated(device)
    return saved, peak


def torch_step(torch, case_name, device, amp, batch):
    torch.manual_seed(0)
    tnn = torch.nn
    if case_name == "cnn":
        model = tnn.Sequential(tnn.Conv2d(1, 32, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(2),
                               tnn.Conv2d(32, 64, 3, padding=1), tnn.ReLU(), tnn.Flatten(),
                               tnn.Linear(64 * 16, 10)).to(device)
        x, y = torch.randn(batch, 1, 8, 8, device=device), torch.randint(0, 10, (batch,), device=device)
        loss_fn = lambda: tnn.functional.cross_entropy(model(x), y)  # noqa: E731
    else:
        model = tnn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, activation="gelu", batch_first=True,
                                            norm_first=True).to(device)
        x, r = torch.randn(batch, 128, 256, device=device), torch.randn(batch, 128, 256, device=device)
        mask = tnn.Transformer.generate_square_subsequent_mask(128, device=device)
        loss_fn = lambda: (model(x, src_mask=mask, is_causal=True) * r).mean()  # noqa: E731
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    dev_type = device.split(":")[0]
    scaler = torch.amp.GradScaler(dev_type, enabled=amp and dev_type == "cuda")
    dtype = torch.float16 if dev_type == "cuda" else torch.bfloat16

    def step():
        opt.zero_grad()
        with torch.autocast(dev_type, dtype=dtype, enabled=amp):
            loss = loss_fn()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        if dev_type == "cuda":
            torch.cuda.synchronize()
    return step


def conversion_time(case, device, batch, repeat):
    """(step seconds, seconds of it inside float16<->float32 conversions): the autocast step with the
    smallest total of ``repeat``; None on a tree without ``autograd/opmath.py``."""
    try:
        from minigrad.autograd import opmath
        from minigrad.amp import autocast_mode
    except ImportError:
        return None
    spent, convert = [0.0], opmath.convert

    def timed(be, array, dtype):
        t0 = time.perf_counter()
        out = convert(be, array, dtype)
        spent[0] += time.perf_counter() - t0
        return out

    step = synced(make_step(case, device, True, batch)[0], device)
    step()
    best = (float("inf"), 0.0)
    with contextlib.ExitStack() as stack:
        for module in (opmath, autocast_mode):
            stack.callback(setattr, module, "convert", convert)
            module.convert = timed
        for _ in range(repeat):
            spent[0] = 0.0
            t0 = time.perf_counter()
            step()
            t = time.perf_counter() - t0
            if t < best[0]:
                best = (t, spent[0])
    return best


def kind_is_numpy(device):
    return device == "cpu" or mg.cuda.is_emulated()


def synced(step, device):
    if device.startswith("cuda"):
        def run():
            step()
            mg.cuda.synchronize()
        return run
    return step


CASES = {"cnn": ("digits CNN (32/64 ch, b={b})", cnn_case, 256), "block": ("GPT block (d=256, L=128, b={b})",
                                                                           block_case, 16)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu")
    p.add_argument("--repeat", type=int, default=9)
    p.add_argument("--only", default="memory,time")
    p.add_argument("--quick", action="store_true", help="tiny batches, one timing (smoke test)")
    args = p.parse_args(argv)
    if args.device.startswith("cuda") and not mg.cuda.is_available():
        sys.exit("amp_step: no CUDA device (MINIGRAD_EMULATE_CUDA=1 for a smoke run on the emulator)")
    torch = None
    if "time" in args.only:
        try:
            import torch
            torch.set_num_threads(2)
            if args.device.startswith("cuda") and not torch.cuda.is_available():
                torch = None
        except ImportError:
            print("(PyTorch not importable: minigrad rows only)", file=sys.stderr)
    repeat = 1 if args.quick else args.repeat
    rows = []
    for key, (label, case, batch) in CASES.items():
        batch = 2 if args.quick else batch
        label = label.format(b=batch)
        if "memory" in args.only:
            (s32, p32), (s16, p16) = (measure_memory(case, args.device, amp, batch) for amp in (False, True))
            rows.append([label, "saved activations", f"{s32 / MIB:.2f}", f"{s16 / MIB:.2f}",
                         f"{s16 / s32:.2f}x (goal <= 0.55)"])
            rows.append(["", "total peak", f"{p32 / MIB:.2f}", f"{p16 / MIB:.2f}", f"{p16 / p32:.2f}x (goal <= 0.7)"])
        if "time" in args.only:
            fns = [synced(make_step(case, args.device, amp, batch)[0], args.device) for amp in (False, True)]
            if torch is not None:
                fns += [torch_step(torch, key, args.device, amp, batch) for amp in (False, True)]
            times = interleaved_medians(fns, repeat, warmup=1 if args.quick else 2, block=1 if args.quick else 3)
            t32, t16 = times[:2]
            rows.append([label, "minigrad step ms", f"{t32 * 1e3:.2f}", f"{t16 * 1e3:.2f}", f"{t16 / t32:.2f}x"])
            floor = conversion_time(case, args.device, batch, repeat) if kind_is_numpy(args.device) else None
            if floor is not None:
                step_t, conv_t = floor
                rows.append(["", "of which f16<->f32 conversions", "", f"{conv_t * 1e3:.2f}",
                             f"{conv_t / step_t:.0%} of the step"])
                rows.append(["", "step without the conversions", f"{t32 * 1e3:.2f}",
                             f"{(step_t - conv_t) * 1e3:.2f}", f"{(step_t - conv_t) / t32:.2f}x"])
            if torch is not None:
                rows.append(["", f"PyTorch {torch.__version__} ms", f"{times[2] * 1e3:.2f}", f"{times[3] * 1e3:.2f}",
                             f"{times[3] / times[2]:.2f}x"])
    kind = " (emulated: times meaningless)" if args.device.startswith("cuda") and mg.cuda.is_emulated() else ""
    print(f"AMP training step on {args.device}{kind}: float32 vs autocast(float16) + GradScaler")
    print(table(rows, ["workload", "measure", "float32", "autocast", "autocast / float32"]))


if __name__ == "__main__":
    main()
