"""A small CNN classifies the 8x8 handwritten digits: conv -> relu -> pool -> conv -> relu -> linear.

    python -m minigrad.examples.digits_cnn                    # ~97.5 % test accuracy
    python -m minigrad.examples.digits_cnn --epochs 5 --channels 8 --out /tmp/cnn

Same data, loop, curves and checkpoint check as ``digits_mlp`` (``train_digits``); only the model and the
input shape (N, 1, 8, 8) differ. Writes ``<out>/digits_cnn.png`` and ``<out>/digits_cnn.npz``.
"""
from minigrad import nn

from ._common import make_parser, runtime
from .digits_mlp import train_digits


def build_cnn(channels=32, dropout=0.3):
    c1, c2 = channels, 2 * channels
    return nn.Sequential(
        nn.Conv2d(1, c1, kernel_size=3, padding=1), nn.ReLU(),     # (N, c1, 8, 8)
        nn.MaxPool2d(2),                                            # (N, c1, 4, 4)
        nn.Conv2d(c1, c2, kernel_size=3, padding=1), nn.ReLU(),    # (N, c2, 4, 4)
        nn.Flatten(), nn.Dropout(dropout),
        nn.Linear(c2 * 4 * 4, 10),
    )


def main(argv=None):
    p = make_parser(__doc__, batch_size=64, lr=3e-3)
    p.add_argument("--epochs", type=int, default=30, help="passes over the 1438 training images")
    p.add_argument("--channels", type=int, default=32, help="channels of the first conv (the second has 2x)")
    p.add_argument("--dropout", type=float, default=0.3)
    p.add_argument("--weight-decay", type=float, default=1e-2)
    args = p.parse_args(argv)
    with runtime(args):
        return train_digits("digits_cnn", lambda: build_cnn(args.channels, args.dropout), args, flatten=False)


if __name__ == "__main__":
    main()
