"""``make demo``: train an MLP and a CNN on the 8x8 digits and a tiny GPT on The Devil's Dictionary, then
print a summary table. About a minute on 2 CPU cores.

    python -m minigrad.examples.demo                 # all three; PNG curves + checkpoints in results/
    python -m minigrad.examples.demo --only tiny_gpt --out /tmp/demo
    python -m minigrad.examples.demo --quick         # a smoke run in seconds, into results/quick/ (no targets)

Targets (checked, exit status 1 if one is missed): MLP and CNN >= 95 % test accuracy; the GPT's validation
loss falls from ~4.4 (ln of the 84-character vocabulary) to <= 2.5. Every run is seeded, so two runs on one
machine print the same numbers (only the times differ). Each model also runs on its own, with more flags:
``python -m minigrad.examples.digits_mlp --help`` (``digits_cnn``, ``tiny_gpt``).
"""
import argparse
import os
import sys
import time

from . import digits_cnn, digits_mlp, tiny_gpt

# name -> (module, settings for the full demo, settings for --quick)
DEMOS = {
    "digits_mlp": (digits_mlp, [], ["--epochs", "2", "--hidden", "32"]),
    "digits_cnn": (digits_cnn, [], ["--epochs", "1", "--channels", "4"]),
    "tiny_gpt": (tiny_gpt, [], ["--steps", "8", "--d-model", "16", "--n-layer", "1", "--n-head", "2",
                                "--block-size", "16", "--batch-size", "8", "--eval-batches", "1",
                                "--sample-len", "40"]),
}
TARGETS = {  # name -> (metric, description, check)
    "digits_mlp": ("test_acc", "test accuracy >= 95 %", lambda v: v >= 0.95),
    "digits_cnn": ("test_acc", "test accuracy >= 95 %", lambda v: v >= 0.95),
    "tiny_gpt": ("val_loss", "validation loss <= 2.5", lambda v: v <= 2.5),
}


def output_dir(args):
    """--quick runs write to results/quick/: a 2-second smoke run never replaces the real curves and
    checkpoints in results/."""
    if args.out is not None:
        return args.out
    return os.path.join("results", "quick") if args.quick else "results"


def summary_table(results):
    header = ("model", "params", "train time", "wall time", "loss first -> last", "test acc / val loss",
              "throughput", "ckpt reload")
    rows = []
    for r in results:
        if r["model"] == "tiny_gpt":
            score = f"val {r['first_val_loss']:.3f} -> {r['val_loss']:.3f}"
            rate = f"{r['tokens_per_s']:,.0f} tok/s"
            reload_ok = r["reloaded_val_loss"] == r["val_loss"]
        else:
            score = f"acc {r['test_acc']:.2%}"
            rate = f"{r['samples_per_s']:,.0f} samples/s"
            reload_ok = r["reloaded_test_acc"] == r["test_acc"]
        rows.append((r["model"], f"{r['params']:,}", f"{r['train_time_s']:.1f} s", f"{r['wall_time_s']:.1f} s",
                     f"{r['first_loss']:.3f} -> {r['final_loss']:.3f}", score, rate,
                     "same" if reload_ok else "DIFFERS"))
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    line = "  ".join("-" * w for w in widths)
    fmt = lambda row: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
    return "\n".join([fmt(header), line, *(fmt(row) for row in rows)])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=None, help="folder for PNG curves, checkpoints and the GPT sample (default "
                                               "results/, or results/quick/ with --quick)")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="BLAS threads (0: library default)")
    p.add_argument("--only", nargs="+", choices=list(DEMOS), help="run only these demos")
    p.add_argument("--quick", action="store_true", help="tiny settings, a few seconds, targets not checked")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    args = p.parse_args(argv)
    args.out = output_dir(args)

    common = ["--out", args.out, "--device", args.device, "--seed", str(args.seed), "--threads", str(args.threads)]
    if args.no_progress:
        common.append("--no-progress")
    names = args.only or list(DEMOS)
    results, failures = [], []
    t_start = time.perf_counter()
    for name in names:
        module, full, quick = DEMOS[name]
        print(f"\n=== {name} " + "=" * (60 - len(name)), flush=True)
        t0 = time.perf_counter()
        metrics = module.main(common + (quick if args.quick else full))
        metrics["wall_time_s"] = time.perf_counter() - t0
        results.append(metrics)
        metric, description, ok = TARGETS[name]
        if not args.quick and not ok(metrics[metric]):
            failures.append(f"{name}: {description} missed ({metric} = {metrics[metric]:.4f})")
    total = time.perf_counter() - t_start

    print("\n=== summary " + "=" * 52)
    print(summary_table(results))
    print(f"\ntotal {total:.1f} s on {os.cpu_count()} CPU core(s), BLAS threads: "
          f"{args.threads if args.threads > 0 else 'library default'}")
    print(f"curves: {', '.join(r['png'] for r in results)}")
    print(f"checkpoints (mg.save, reloaded with mg.load): {', '.join(r['checkpoint'] for r in results)}")
    if args.quick:
        print("--quick: targets not checked")
    elif failures:
        print("TARGETS MISSED:\n  " + "\n  ".join(failures))
    else:
        print("all targets met: " + "; ".join(f"{n}: {TARGETS[n][1]}" for n in names))
    return {"results": results, "failures": failures, "total_s": total}


if __name__ == "__main__":
    sys.exit(1 if main()["failures"] else 0)
