"""Fully sharded data parallelism (ZeRO-3, with ZeRO-2 as an option), PyTorch's FSDP names."""
from .flat_param import FlatParamUnit
from .fully_sharded import FullyShardedDataParallel, MixedPrecision, ModuleWrapPolicy, ShardingStrategy

__all__ = ["FlatParamUnit", "FullyShardedDataParallel", "MixedPrecision", "ModuleWrapPolicy", "ShardingStrategy"]
