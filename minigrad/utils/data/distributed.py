"""DistributedSampler: each rank reads its own 1/N of the dataset, a different 1/N every epoch.

All ranks shuffle with the same seed (``seed + epoch``, so call ``set_epoch`` each epoch), pad the order by
repeating its start until it divides evenly (or drop the tail with ``drop_last``), then rank r takes every
N-th index from position r: the shards are disjoint and of equal length, so no rank waits at an
all-reduce for a batch the others do not have.
"""
import numpy as np

from ...errors import ArgumentError
from .sampler import Sampler

__all__ = ["DistributedSampler"]


class DistributedSampler(Sampler):
    """``DistributedSampler(dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False)``;
    ``num_replicas`` and ``rank`` default to the process group's."""

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False):
        if num_replicas is None or rank is None:
            from ... import distributed as dist
            if not dist.is_initialized():
                raise ArgumentError("DistributedSampler: pass num_replicas and rank, or call "
                                    "init_process_group first")
            num_replicas = dist.get_world_size() if num_replicas is None else num_replicas
            rank = dist.get_rank() if rank is None else rank
        if not 0 <= rank < num_replicas:
            raise ArgumentError(f"DistributedSampler: invalid rank {rank}, rank should be in the interval "
                                f"[0, {num_replicas - 1}]")
        self.dataset, self.num_replicas, self.rank = dataset, int(num_replicas), int(rank)
        self.shuffle, self.seed, self.drop_last = bool(shuffle), int(seed), bool(drop_last)
        self.epoch = 0
        n = len(dataset)
        if self.drop_last and n % self.num_replicas:
            self.num_samples = n // self.num_replicas
        else:
            self.num_samples = -(-n // self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            order = np.random.default_rng(self.seed + self.epoch).permutation(n)
        else:
            order = np.arange(n)
        if self.drop_last:
            order = order[:self.total_size]
        elif self.total_size > n:  # pad by repeating the start (as often as needed for tiny datasets)
            order = np.resize(order, self.total_size)
        return iter(order[self.rank:self.total_size:self.num_replicas].tolist())

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """Reshuffle for this epoch (the same order on every rank)."""
        self.epoch = int(epoch)
