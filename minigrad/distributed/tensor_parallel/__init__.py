"""Tensor parallelism (Megatron-style): the comm ops, the parallel layers, vocab-parallel cross-entropy and
``parallelize_module`` with PyTorch's ``ColwiseParallel`` / ``RowwiseParallel`` plans."""
from .comm_ops import copy_to_parallel, gather_from_parallel, reduce_from_parallel, scatter_to_parallel
from .layers import ColumnParallelLinear, RowParallelLinear, TensorParallelAttention, VocabParallelEmbedding
from .loss import vocab_parallel_cross_entropy
from .style import (ColwiseParallel, HeadwiseParallel, ParallelStyle, Replicate, RowwiseParallel, Shard,
                    parallelize_module)

__all__ = ["copy_to_parallel", "gather_from_parallel", "reduce_from_parallel", "scatter_to_parallel",
           "ColumnParallelLinear", "RowParallelLinear", "TensorParallelAttention", "VocabParallelEmbedding",
           "vocab_parallel_cross_entropy", "ColwiseParallel", "HeadwiseParallel", "ParallelStyle", "Replicate",
           "RowwiseParallel", "Shard", "parallelize_module"]
