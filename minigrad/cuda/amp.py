"""``mg.cuda.amp``: PyTorch's deprecated spellings ``torch.cuda.amp.GradScaler(...)`` and
``torch.cuda.amp.autocast(...)``, kept so that older programs run. Each warns (FutureWarning, as PyTorch
does) and returns ``mg.amp.GradScaler('cuda', ...)`` / ``mg.autocast('cuda', ...)``. On a machine without a
usable GPU that scaler warns and disables itself, as PyTorch's does.
"""
import warnings

from ..amp import GradScaler as _GradScaler, autocast as _autocast


def GradScaler(init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000, enabled=True):
    warnings.warn("torch.cuda.amp.GradScaler(args...) is deprecated. Please use "
                  "torch.amp.GradScaler('cuda', args...) instead.", FutureWarning, stacklevel=2)
    return _GradScaler("cuda", init_scale=init_scale, growth_factor=growth_factor,
                       backoff_factor=backoff_factor, growth_interval=growth_interval, enabled=enabled)


def autocast(enabled=True, dtype=None, cache_enabled=True):
    warnings.warn("torch.cuda.amp.autocast(args...) is deprecated. Please use "
                  "torch.amp.autocast('cuda', args...) instead.", FutureWarning, stacklevel=2)
    return _autocast("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)
