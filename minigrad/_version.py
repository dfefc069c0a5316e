"""The package version: one place, read by ``minigrad.__version__`` and by checkpoints (serialization.py)."""
__version__ = "0.1.0"
