"""Utilities that build on the core: ``minigrad.utils.data`` (datasets, samplers, DataLoader) and
``minigrad.utils.graph`` (trace and draw the autograd graph), ``minigrad.utils.checkpoint`` (activation
checkpointing)."""
from . import checkpoint, data, graph

__all__ = ["checkpoint", "data", "graph"]
