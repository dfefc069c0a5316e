"""A stand-in for the two torchvision pieces pytorch/examples' MNIST program uses, so it runs on local data.

torchvision is a separate package (not part of torch, not part of minigrad). The program calls
``datasets.MNIST(root, train=..., download=True, transform=...)``, which would download MNIST; this stand-in
reads the same IDX files from ``root/MNIST/raw/`` instead (tests/compat/local_data.py writes small ones) and
never downloads. It is written against ``torch``'s API, so it serves both minigrad (through
``python -m minigrad.as_torch``) and PyTorch (benchmarks/compat_compare.py).
"""
from . import datasets, transforms

__all__ = ["datasets", "transforms"]
