"""``Compose``, ``ToTensor`` and ``Normalize`` with torchvision's semantics, on ``torch`` tensors."""
import numpy as np
import torch


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img


class ToTensor:
    """An (H, W) or (H, W, C) uint8 image -> a float32 (C, H, W) tensor in [0, 1]."""

    def __call__(self, pic):
        arr = np.asarray(pic)
        if arr.ndim == 2:
            arr = arr[:, :, None]
        return torch.from_numpy(np.ascontiguousarray(arr.transpose(2, 0, 1)).astype(np.float32) / 255.0)


class Normalize:
    """(x - mean) / std per channel."""

    def __init__(self, mean, std):
        self.mean, self.std = mean, std

    def __call__(self, tensor):
        mean = torch.tensor(self.mean, dtype=tensor.dtype).reshape(-1, 1, 1)
        std = torch.tensor(self.std, dtype=tensor.dtype).reshape(-1, 1, 1)
        return (tensor - mean) / std
