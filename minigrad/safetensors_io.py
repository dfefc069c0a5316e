"""State dicts in the ``safetensors`` format (Hugging Face's): ``mg.save_safetensors`` / ``mg.load_safetensors``.

A safetensors file is an 8-byte little-endian header length, a JSON header (each tensor's dtype, shape and
byte range, plus an optional ``__metadata__`` dict of strings) and the raw bytes: no code, no pickle, and
readable by every framework (``safetensors.numpy.load_file``, ``safetensors.torch.load_file``). The
``safetensors`` library itself writes and reads it here (a dev/export dependency, imported when used).

Only a flat ``{name: tensor}`` dict fits the format: a model's ``state_dict()`` does; an optimizer's state
(nested dicts, numbers) does not — ``mg.save`` stores those (``serialization.py``). Writes are atomic, as
``mg.save``'s.
"""
import os

import numpy as np

from .errors import ArgumentError
from .serialization import CheckpointError, atomic_write
from .tensor import Tensor, tensor


def _library():
    try:
        import safetensors.numpy as st
    except ImportError:
        raise ImportError("save_safetensors/load_safetensors need the 'safetensors' package: "
                          "pip install safetensors (or minigrad[export])") from None
    return st


def save_safetensors(state_dict, path, metadata=None):
    """Write ``{name: Tensor or ndarray}`` to ``path``; ``metadata``: a dict of str -> str kept in the header."""
    st = _library()
    arrays = {}
    for name, value in state_dict.items():
        if not isinstance(name, str):
            raise CheckpointError(f"save_safetensors: keys must be strings, got {name!r}")
        if isinstance(value, Tensor):
            value = value.detach().cpu().numpy()
        if not isinstance(value, np.ndarray):
            raise CheckpointError(f"save_safetensors: {name!r} is a {type(value).__name__}, not a tensor; the "
                                  f"format holds tensors only (mg.save stores any state)")
        arrays[name] = np.ascontiguousarray(value)
    if metadata is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise ArgumentError("save_safetensors: metadata must map str to str")
    data = st.save(arrays, metadata=metadata)
    atomic_write(path, lambda fh: fh.write(data))


def load_safetensors(path, device=None):
    """``{name: Tensor}`` from a safetensors file, on ``device`` (default cpu).
    A file that is not safetensors raises CheckpointError."""
    st = _library()
    if not os.path.isfile(path):
        raise FileNotFoundError(f"load_safetensors: no file {os.fspath(path)!r}")
    try:
        arrays = st.load_file(os.fspath(path))
    except Exception as e:  # the library raises its own SafetensorError (and others) on a bad file
        raise CheckpointError(f"load_safetensors: {os.fspath(path)!r} is not a readable safetensors file "
                              f"({type(e).__name__}: {e})") from None
    return {name: tensor(a, device=device) for name, a in arrays.items()}


def safetensors_metadata(path):
    """The ``__metadata__`` dict of a safetensors file (without loading the tensors)."""
    _library()
    from safetensors import safe_open
    try:
        with safe_open(os.fspath(path), framework="numpy") as f:
            return dict(f.metadata() or {})
    except Exception as e:
        raise CheckpointError(f"safetensors_metadata: {os.fspath(path)!r} is not a readable safetensors file "
                              f"({type(e).__name__}: {e})") from None
