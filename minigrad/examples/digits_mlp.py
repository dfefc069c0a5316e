"""An MLP classifies the 8x8 handwritten digits (scikit-learn's copy of the UCI set, no download).

    python -m minigrad.examples.digits_mlp                    # ~97.5 % test accuracy in a few seconds
    python -m minigrad.examples.digits_mlp --epochs 5 --batch-size 32 --out /tmp/mlp

The training loop is the PyTorch one with ``torch`` spelled ``mg``: DataLoader -> forward -> loss ->
zero_grad -> backward -> step -> scheduler step. Writes ``<out>/digits_mlp.png`` (loss and accuracy
curves) and ``<out>/digits_mlp.npz`` (a checkpoint, reloaded into a fresh model to check it reproduces the
test accuracy). ``train_digits`` is shared with ``digits_cnn``.
"""
import os

import minigrad as mg
from minigrad import nn
from minigrad.datasets import load_digits
from minigrad.nn import functional as F
from minigrad.utils.data import DataLoader

from ._common import (Timer, count_params, finite, make_parser, plain_args, progress, resolve_device,
                      results_dir, runtime, save_and_verify, save_curves, set_seed, smooth)


def build_mlp(hidden=512, dropout=0.2):
    return nn.Sequential(
        nn.Linear(64, hidden), nn.ReLU(), nn.Dropout(dropout),
        nn.Linear(hidden, hidden), nn.ReLU(), nn.Dropout(dropout),
        nn.Linear(hidden, 10),
    )


def accuracy_range(accs):
    """A y range that shows the difference between 96 % and 98 %: from just below the last half of the run's
    accuracies to 100 % (the first epochs, far below, go off the bottom)."""
    tail = accs[len(accs) // 2:] or [0.0]
    return (max(0.0, min(tail) - 0.03), 1.005)


def evaluate(model, x, y):
    """(mean cross-entropy, accuracy) of ``model`` on the whole of ``x``, ``y`` (eval mode, no graph)."""
    was_training = model.training
    model.eval()
    with mg.no_grad():
        logits = model(x)
        loss = F.cross_entropy(logits, y).item()
        acc = (logits.argmax(dim=1) == y).float().mean().item()
    model.train(was_training)
    return loss, acc


def train_digits(name, build_model, args, *, flatten):
    """Train ``build_model()`` on the digits' train split for ``args.epochs``, report on the test split."""
    device = resolve_device(args.device)
    out = results_dir(args.out)
    generator = set_seed(args.seed)                      # init + shuffling are seeded: runs are repeatable
    train_set = load_digits("train", flatten=flatten)
    test_set = load_digits("test", flatten=flatten)
    loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, generator=generator)
    x_test, y_test = (t.to(device) for t in test_set.tensors)

    model = build_model().to(device)
    n_params = count_params(model)
    optimizer = mg.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    total_steps = args.epochs * len(loader)
    scheduler = mg.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=total_steps, eta_min=args.lr / 20)
    loss_fn = nn.CrossEntropyLoss()

    step_losses, epoch_stats = [], []
    timer = Timer()
    test_loss, test_acc = evaluate(model, x_test, y_test)
    epoch_stats.append((0, float("nan"), float("nan"), test_loss, test_acc))
    bar = progress(args.epochs * len(train_set), name, "sample", enabled=not args.no_progress)
    for epoch in range(1, args.epochs + 1):
        model.train()
        seen = correct = 0
        loss_sum = 0.0
        with timer:                                      # training time: loading + steps, not evaluation
            for x, y in loader:
                x, y = x.to(device), y.to(device)
                logits = model(x)
                loss = loss_fn(logits, y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                scheduler.step()
                step_losses.append(loss.item())
                n = len(y)
                seen += n
                loss_sum += step_losses[-1] * n
                correct += int((logits.detach().argmax(dim=1) == y).sum().item())
                bar.update(n)
                bar.set_postfix(epoch=epoch, loss=f"{smooth(step_losses[-20:], 0.3)[-1]:.3f}",
                                test_acc=f"{test_acc:.3f}", refresh=False)
        test_loss, test_acc = evaluate(model, x_test, y_test)
        epoch_stats.append((epoch, loss_sum / seen, correct / seen, test_loss, test_acc))
    bar.set_postfix(loss=f"{epoch_stats[-1][1]:.3f}", test_acc=f"{test_acc:.3f}")
    bar.close()

    png = save_curves(os.path.join(out, f"{name}.png"), [
        {"title": "loss", "xlabel": "epoch", "ylabel": "cross-entropy",
         "series": {"train (per step)": ([i / len(loader) for i in range(1, len(step_losses) + 1)], step_losses),
                    "train (epoch mean)": ([e[0] for e in epoch_stats[1:]], [e[1] for e in epoch_stats[1:]]),
                    "test": ([e[0] for e in epoch_stats], [e[3] for e in epoch_stats])},
         "styles": {"train (per step)": {"alpha": 0.3, "lw": 0.8}}},
        {"title": "accuracy (zoomed in on the last epochs' range)", "xlabel": "epoch", "ylabel": "accuracy",
         "ylim": accuracy_range([e[2] for e in epoch_stats[1:]] + [e[4] for e in epoch_stats[1:]]),
         "series": {"train": ([e[0] for e in epoch_stats[1:]], [e[2] for e in epoch_stats[1:]]),
                    "test": ([e[0] for e in epoch_stats], [e[4] for e in epoch_stats])},
         "notes": [(args.epochs, test_acc, f"test {test_acc:.1%}")]},
    ], title=f"{name}: {n_params:,} parameters, {args.epochs} epochs")

    ckpt = os.path.join(out, f"{name}.npz")
    (re_loss, re_acc), ckpt_bytes = save_and_verify(
        ckpt, model, build_model, lambda m: evaluate(m, x_test, y_test),
        extra={"epoch": args.epochs, "test_accuracy": test_acc, "args": plain_args(args)})

    metrics = {
        "model": name, "params": n_params, "epochs": args.epochs, "steps": len(step_losses),
        "train_time_s": timer.seconds, "samples_per_s": args.epochs * len(train_set) / max(timer.seconds, 1e-9),
        "first_loss": step_losses[0], "final_loss": epoch_stats[-1][1], "train_acc": epoch_stats[-1][2],
        "test_loss": test_loss, "test_acc": test_acc, "reloaded_test_acc": re_acc,
        "png": png, "checkpoint": ckpt, "checkpoint_bytes": ckpt_bytes,
    }
    if not finite(metrics["final_loss"], metrics["test_loss"]):
        raise RuntimeError(f"{name}: training diverged (final loss {metrics['final_loss']}, test loss "
                           f"{metrics['test_loss']})")
    print(f"{name}: test accuracy {test_acc:.2%} (reloaded checkpoint: {re_acc:.2%}), loss "
          f"{metrics['first_loss']:.3f} -> {metrics['final_loss']:.3f}, {timer.seconds:.1f} s, "
          f"{metrics['samples_per_s']:,.0f} samples/s -> {png}, {ckpt}")
    return metrics


def main(argv=None):
    p = make_parser(__doc__, batch_size=64, lr=3e-3)
    p.add_argument("--epochs", type=int, default=30, help="passes over the 1438 training images")
    p.add_argument("--hidden", type=int, default=512, help="width of the two hidden layers")
    p.add_argument("--dropout", type=float, default=0.2)
    p.add_argument("--weight-decay", type=float, default=1e-2)
    args = p.parse_args(argv)
    with runtime(args):
        return train_digits("digits_mlp", lambda: build_mlp(args.hidden, args.dropout), args, flatten=True)


if __name__ == "__main__":
    main()
