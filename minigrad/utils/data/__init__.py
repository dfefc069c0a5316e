"""``mg.utils.data``: datasets, samplers and the DataLoader, with PyTorch's names.

>>> from minigrad.utils.data import DataLoader, TensorDataset, random_split
>>> train, val = random_split(TensorDataset(x, y), [0.8, 0.2], generator=mg.Generator().manual_seed(0))
>>> for xb, yb in DataLoader(train, batch_size=64, shuffle=True, num_workers=2): ...
"""
from ._worker import WorkerError, WorkerInfo, get_worker_info
from .collate import default_collate, default_convert
from .dataloader import DataLoader
from .distributed import DistributedSampler
from .dataset import ConcatDataset, Dataset, IterableDataset, Subset, TensorDataset, random_split
from .sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler,
                      WeightedRandomSampler)

__all__ = ["BatchSampler", "ConcatDataset", "DataLoader", "Dataset", "DistributedSampler", "IterableDataset", "RandomSampler",
           "Sampler", "SequentialSampler", "Subset", "SubsetRandomSampler", "TensorDataset",
           "WeightedRandomSampler", "WorkerError", "WorkerInfo", "default_collate", "default_convert",
           "get_worker_info", "random_split"]
