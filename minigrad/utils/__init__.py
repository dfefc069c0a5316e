"""Utilities that build on the core: ``minigrad.utils.data`` (datasets, samplers, DataLoader) and
``minigrad.utils.graph`` (trace and draw the autograd graph)."""
from . import data, graph

__all__ = ["data", "graph"]
