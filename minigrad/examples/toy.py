"""Core-API demo: a 2-layer MLP learns two interleaved spirals with hand-written SGD.

Only tensors, ops and autograd are used (no nn, no optim), so this is what the core alone can do:

    python -m minigrad.examples.toy --steps 300
"""
import argparse
import math

import numpy as np

import minigrad as mg


def spirals(n_per_class, rng):
    t = rng.uniform(0.25, 1.0, size=n_per_class) * 3 * math.pi
    a = np.stack([t * np.cos(t), t * np.sin(t)], 1) / (3 * math.pi)
    x = np.concatenate([a, -a]) + rng.normal(0, 0.02, size=(2 * n_per_class, 2))
    y = np.concatenate([np.zeros(n_per_class), np.ones(n_per_class)]).astype(np.int64)
    return x.astype(np.float32), y


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    mg.manual_seed(args.seed)
    x_np, y_np = spirals(200, np.random.default_rng(args.seed))
    x, y = mg.tensor(x_np), mg.tensor(y_np)
    target = mg.one_hot(y, 2).float()
    w1 = (mg.randn(2, args.hidden) * math.sqrt(2 / 2)).requires_grad_()
    b1 = mg.zeros(args.hidden, requires_grad=True)
    w2 = (mg.randn(args.hidden, args.hidden) * math.sqrt(2 / args.hidden)).requires_grad_()
    b2 = mg.zeros(args.hidden, requires_grad=True)
    w3 = (mg.randn(args.hidden, 2) * math.sqrt(1 / args.hidden)).requires_grad_()
    b3 = mg.zeros(2, requires_grad=True)
    params = [w1, b1, w2, b2, w3, b3]

    print(f"two spirals, {len(y_np)} points, MLP 2-{args.hidden}-{args.hidden}-2, SGD lr={args.lr}")
    first = None
    for step in range(args.steps + 1):
        h = mg.maximum(x @ w1 + b1, 0.0)
        h = mg.maximum(h @ w2 + b2, 0.0)
        logits = h @ w3 + b3
        log_probs = logits - logits.logsumexp(dim=1, keepdim=True)   # stable log-softmax
        loss = -(log_probs * target).sum(dim=1).mean()
        for p_ in params:
            p_.grad = None
        loss.backward()
        with mg.no_grad():
            for p_ in params:
                p_ -= args.lr * p_.grad
        if first is None:
            first = loss.item()
        if step % (args.steps // 8) == 0:
            acc = (logits.argmax(dim=1) == y).float().mean().item()
            print(f"step {step:4d}  loss {loss.item():.4f}  accuracy {acc:6.1%}")
    print(f"loss went from {first:.4f} to {loss.item():.4f}")
    return loss.item(), acc


if __name__ == "__main__":
    main()
