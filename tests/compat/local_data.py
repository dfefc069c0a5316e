"""Small local data in place of the downloads the compatibility programs would make.

Each ``prepare_<program>(work)`` writes, under the working directory ``work`` (a copy of the program's
folder), the files the program reads, in the format it expects -- the only thing about the programs that is
replaced. The data are small so that a few training steps take seconds:

* mnist: MNIST's IDX files in ``../data/MNIST/raw`` (relative to where main.py runs), made from
  scikit-learn's bundled 8x8 digits scaled to 28x28 (no download);
* word_language_model: ``data/wikitext-2/{train,valid,test}.txt`` cut from the public-domain text that ships
  with minigrad (The Devil's Dictionary);
* nanogpt: ``data/shakespeare_char/input.txt`` from the same text; the program's own ``prepare.py`` (which
  downloads only when input.txt is missing) then writes train.bin, val.bin and meta.pkl;
* makemore and polynomial need nothing (makemore's names.txt subset is committed with it).
"""
import os
import subprocess
import sys

import numpy as np


def _text(lines):
    from minigrad.datasets.text import corpus_text
    body = [ln for ln in corpus_text().splitlines() if ln.strip()]
    return body[:lines]


def _write_idx(path, array):
    """IDX: magic (0, 0, 0x08 = uint8, ndim), big-endian int32 dims, then the bytes."""
    with open(path, "wb") as f:
        f.write(bytes([0, 0, 8, array.ndim]))
        for d in array.shape:
            f.write(int(d).to_bytes(4, "big"))
        f.write(np.ascontiguousarray(array, dtype=np.uint8).tobytes())


def prepare_mnist(work, n_train=96, n_test=48):
    from sklearn.datasets import load_digits
    digits = load_digits()
    images = np.kron(digits.images, np.ones((3, 3)))                 # 8x8 -> 24x24
    images = np.pad(images, ((0, 0), (2, 2), (2, 2))) * (255.0 / 16.0)  # -> 28x28, 0..255
    raw = os.path.join(work, "data", "MNIST", "raw")
    os.makedirs(raw, exist_ok=True)
    parts = {"train": slice(0, n_train), "t10k": slice(n_train, n_train + n_test)}
    for prefix, rows in parts.items():
        _write_idx(os.path.join(raw, f"{prefix}-images-idx3-ubyte"), images[rows].round())
        _write_idx(os.path.join(raw, f"{prefix}-labels-idx1-ubyte"), digits.target[rows])
    os.makedirs(os.path.join(work, "run"), exist_ok=True)             # main.py reads '../data'
    return os.path.join(work, "run")


def prepare_word_language_model(work):
    lines = _text(360)
    folder = os.path.join(work, "data", "wikitext-2")
    os.makedirs(folder, exist_ok=True)
    for name, part in (("train", lines[:240]), ("valid", lines[240:300]), ("test", lines[300:360])):
        with open(os.path.join(folder, f"{name}.txt"), "w", encoding="utf8") as f:
            f.write("\n".join(part) + "\n")
    return work


def prepare_nanogpt(work, python=sys.executable):
    folder = os.path.join(work, "data", "shakespeare_char")
    with open(os.path.join(folder, "input.txt"), "w") as f:
        f.write("\n".join(_text(1200)) + "\n")
    subprocess.run([python, "prepare.py"], cwd=folder, check=True, capture_output=True)
    return work
