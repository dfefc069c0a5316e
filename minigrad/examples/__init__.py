"""Runnable examples: ``python -m minigrad.examples.<name>``."""
