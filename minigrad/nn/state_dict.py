"""``state_dict()`` / ``load_state_dict()``: a module's parameters and persistent buffers by dotted name.

A mixin of ``Module`` (kept apart because it is its own idea: naming, matching and copying state); the
names and messages are PyTorch's, so checkpoints and error messages read the same.
"""
import collections
from collections import OrderedDict

import numpy as np

from ..backend.device import get_backend
from ..errors import StateDictError
from ..tensor import Tensor


class _IncompatibleKeys(collections.namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


class StateDictMixin:
    """``Module``'s state-dict methods; they read ``_parameters``, ``_buffers``, ``_modules`` and
    ``_non_persistent_buffers_set``."""

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """An ordered dict of every parameter and persistent buffer by dotted name.

        Values are detached tensors sharing storage with the module (``keep_vars=True``: the Parameters
        themselves); save a copy with ``mg.save`` before training further if you need a snapshot.
        """
        if args:  # PyTorch's positional (destination, prefix, keep_vars)
            destination = args[0] if len(args) > 0 else destination
            prefix = args[1] if len(args) > 1 else prefix
            keep_vars = args[2] if len(args) > 2 else keep_vars
        if destination is None:
            destination = OrderedDict()
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, mod in self._modules.items():
            if mod is not None:
                mod.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        return destination

    def _load_from_state_dict(self, state_dict, prefix, missing, mismatched, loaded):
        local = [(n, p) for n, p in self._parameters.items() if p is not None]
        local += [(n, b) for n, b in self._buffers.items()
                  if b is not None and n not in self._non_persistent_buffers_set]
        for name, target in local:
            key = prefix + name
            if key not in state_dict:
                missing.append(key)
                continue
            loaded.add(key)
            value = state_dict[key]
            if not isinstance(value, Tensor):
                try:
                    value = np.asarray(value)
                except Exception:
                    mismatched.append(f'While copying the parameter named "{key}", expected a tensor or array, '
                                      f'got {type(value).__name__}')
                    continue
            if tuple(value.shape) != tuple(target.shape):
                mismatched.append(f"size mismatch for {key}: copying a param with shape {tuple(value.shape)} "
                                  f"from checkpoint, the shape in current model is {tuple(target.shape)}.")
                continue
            _copy_into(target, value)

    def load_state_dict(self, state_dict, strict=True):
        """Copy values from ``state_dict`` into this module's parameters and buffers (in place).

        Shape mismatches always raise; with ``strict=True`` (default) missing and unexpected keys raise too,
        all listed in one StateDictError. Returns ``(missing_keys, unexpected_keys)``.
        """
        if not hasattr(state_dict, "keys"):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict).__name__}.")
        missing, mismatched, loaded = [], [], set()
        for name, mod in self.named_modules():
            mod._load_from_state_dict(state_dict, name + "." if name else "", missing, mismatched, loaded)
        unexpected = [k for k in state_dict.keys() if k not in loaded]
        errors = []
        if strict:
            if unexpected:
                errors.append("Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected)
                              + ". ")
            if missing:
                errors.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ". ")
        errors.extend(mismatched)
        if errors:
            raise StateDictError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                                 + "\n\t".join(errors))
        return _IncompatibleKeys(missing, unexpected)


def _copy_into(target, value):
    """``target``'s storage takes ``value``'s values (device and dtype of the target kept)."""
    be = get_backend(target.device)
    if isinstance(value, Tensor):
        host_or_dev = value.array if value.device == target.device else \
            be.asarray(np.asarray(get_backend(value.device).to_host(value.array)))
    else:
        host_or_dev = be.asarray(value)
    target.array[...] = host_or_dev
    target._version_counter.bump()
