"""``MNIST`` from local IDX files (no download): see the package docstring."""
import os

import numpy as np
import torch


def read_idx(path):
    """An IDX file (MNIST's format): big-endian magic (dtype code, ndim), the dims, then the data."""
    with open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


class MNIST(torch.utils.data.Dataset):
    """``(image, label)`` pairs; ``transform`` gets the 28x28 uint8 image as a NumPy array (torchvision
    hands a PIL image, which ToTensor treats the same way)."""

    def __init__(self, root, train=True, transform=None, target_transform=None, download=False):
        prefix = "train" if train else "t10k"
        raw = os.path.join(root, "MNIST", "raw")
        self.data = read_idx(os.path.join(raw, f"{prefix}-images-idx3-ubyte"))
        self.targets = read_idx(os.path.join(raw, f"{prefix}-labels-idx1-ubyte")).astype(np.int64)
        self.transform, self.target_transform = transform, target_transform

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        img, target = self.data[index], int(self.targets[index])
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return img, target
