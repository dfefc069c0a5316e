"""Utilities that build on the core: ``minigrad.utils.data`` (datasets, samplers, DataLoader)."""
from . import data

__all__ = ["data"]
