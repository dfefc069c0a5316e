"""minigrad.amp: automatic mixed precision, PyTorch's names.

    autocast_mode.py   ``mg.autocast``: per-op casting by the policy table (plugs into input_casts)
    policy.py          the table: which ops run in float16, which in float32, which promote
    grad_scaler.py     ``GradScaler``: dynamic loss scaling (scale, unscale + inf check, skip, update)
    master_weights.py  float32 master copies for a model converted with ``.half()``

The core never imports this package; it registers itself on the core's extension points when used.
"""
from . import policy
from .autocast_mode import autocast, clear_autocast_cache, get_autocast_dtype, is_autocast_enabled
from .grad_scaler import GradScaler, GradScalerError
from .master_weights import master_weights

__all__ = ["autocast", "GradScaler", "GradScalerError", "master_weights", "policy", "is_autocast_enabled",
           "get_autocast_dtype", "clear_autocast_cache"]
