"""Turning a list of samples into a batch: ``default_collate`` and ``default_convert``.

Batches travel between processes as NumPy arrays, never as minigrad tensors: a worker wraps each array that
is to become a tensor in a ``TensorData`` marker, the main process unwraps the markers into tensors
(``from_transport``). Collating is therefore done in two halves:

* ``collate_arrays(batch)`` stacks samples into NumPy arrays and returns the batch with ``TensorData``
  markers where tensors belong (this is what runs inside a worker);
* ``default_collate(batch) == from_transport(collate_arrays(batch))`` (what runs in the main process).

Rules (PyTorch's): tensors and NumPy arrays are stacked along a new first dimension; Python floats become a
float64 tensor, ints an int64 tensor, bools a bool tensor; NumPy scalars keep their dtype; strings and bytes
stay a list; dicts, namedtuples, tuples and lists are collated field by field (tuples and lists give lists,
as in PyTorch).
"""
import collections.abc

import numpy as np

from ...ops import stack
from ...tensor import Tensor, tensor

from ...errors import DTypeError, ShapeError

__all__ = ["default_collate", "default_convert", "collate_arrays", "convert_arrays", "to_transport",
           "from_transport", "TensorData"]


class TensorData:
    """A NumPy array that becomes a minigrad tensor once it reaches the main process."""

    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __reduce__(self):
        return (TensorData, (self.array,))

    def __repr__(self):
        return f"TensorData(shape={self.array.shape}, dtype={self.array.dtype})"


_ELEM_TYPES = "tensors, numpy arrays, numbers, strings, dicts or lists"


def _is_namedtuple(obj):
    return isinstance(obj, tuple) and hasattr(obj, "_fields")


def _rebuild_mapping(template, items):
    """A mapping of the same type as ``template`` when that type can be built from pairs, else a dict."""
    if type(template) is dict:
        return dict(items)
    try:
        return type(template)(items)
    except TypeError:
        return dict(items)


def _tensor_on_host(t):
    """The NumPy array behind a cpu tensor, or None (device tensors are stacked with mg.stack)."""
    return t.array if t.device.type == "cpu" and isinstance(t.array, np.ndarray) else None


def _check_numeric(dtype, what):
    if dtype.hasobject or dtype.kind in "USV":
        raise DTypeError(f"default_collate: {what} of dtype {dtype} cannot become a tensor; batch must contain "
                         f"{_ELEM_TYPES} (use a custom collate_fn for other types)")


def _stack(arrays, what):
    shape = arrays[0].shape
    for i, a in enumerate(arrays):
        if a.shape != shape:
            raise ShapeError(f"default_collate: {what} in a batch must have equal shapes, but sample 0 has "
                             f"shape {tuple(shape)} and sample {i} has shape {tuple(a.shape)} "
                             f"(pad them in a custom collate_fn)")
    return np.stack(arrays)


def collate_arrays(batch):
    """``default_collate`` with NumPy arrays (wrapped in ``TensorData``) where tensors belong."""
    if len(batch) == 0:
        raise ShapeError("default_collate: cannot collate an empty batch")
    elem = batch[0]
    if isinstance(elem, Tensor):
        arrays = [_tensor_on_host(t) for t in batch]
        if any(a is None for a in arrays) or any(t.requires_grad for t in batch):
            return stack(list(batch), 0)  # device tensors / autograd: the core's stack
        return TensorData(_stack(arrays, "tensors"))
    if isinstance(elem, TensorData):
        return TensorData(_stack([b.array for b in batch], "tensors"))
    if isinstance(elem, np.ndarray):
        _check_numeric(elem.dtype, "numpy arrays")
        return TensorData(_stack(batch, "numpy arrays"))
    if isinstance(elem, np.generic):
        _check_numeric(elem.dtype, "numpy scalars")
        return TensorData(np.asarray(batch, dtype=elem.dtype))
    if isinstance(elem, (bool, int, float)):
        arr = np.asarray(batch)  # mixed ints and floats give float, as torch.tensor does
        if arr.dtype.kind == "b":
            return TensorData(arr)
        if arr.dtype.kind in "iu":
            return TensorData(arr.astype(np.int64, copy=False))
        if arr.dtype.kind == "f":
            return TensorData(arr.astype(np.float64, copy=False))
        raise DTypeError(f"default_collate: cannot collate numbers mixed with {arr.dtype} values")
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, collections.abc.Mapping):
        try:
            return _rebuild_mapping(elem, [(key, collate_arrays([d[key] for d in batch])) for key in elem])
        except KeyError as e:
            raise ShapeError(f"default_collate: dict samples have different keys (missing {e})") from None
    if _is_namedtuple(elem):
        return type(elem)(*(collate_arrays(list(samples)) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        for i, e in enumerate(batch):
            if len(e) != size:
                raise ShapeError(f"default_collate: each element in a batch of sequences must have equal "
                                 f"size, but sample 0 has {size} fields and sample {i} has {len(e)}")
        return [collate_arrays(list(samples)) for samples in zip(*batch)]
    raise DTypeError(f"default_collate: batch must contain {_ELEM_TYPES}; found {type(elem).__name__}")


def convert_arrays(data):
    """``default_convert`` with ``TensorData`` markers: NumPy arrays (and NumPy scalars) will become tensors."""
    if isinstance(data, Tensor):
        host = _tensor_on_host(data)
        return data if host is None or data.requires_grad else TensorData(host)
    if isinstance(data, np.ndarray):
        return data if data.dtype.hasobject or data.dtype.kind in "USV" else TensorData(data)
    if isinstance(data, np.generic):
        return data if data.dtype.hasobject or data.dtype.kind in "USV" else TensorData(np.asarray(data))
    if isinstance(data, (str, bytes)):
        return data
    if isinstance(data, collections.abc.Mapping):
        return _rebuild_mapping(data, [(k, convert_arrays(v)) for k, v in data.items()])
    if _is_namedtuple(data):
        return type(data)(*(convert_arrays(d) for d in data))
    if isinstance(data, tuple):
        return [convert_arrays(d) for d in data]  # PyTorch's default_convert turns tuples into lists too
    if isinstance(data, list):
        return [convert_arrays(d) for d in data]
    return data


def _as_tensor(array):
    return tensor(array)  # keeps the array's dtype


def from_transport(obj):
    """Replace every ``TensorData`` marker in a (nested) batch by a minigrad tensor."""
    if isinstance(obj, TensorData):
        return _as_tensor(obj.array)
    if isinstance(obj, (str, bytes, np.ndarray)) or obj is None:
        return obj
    if isinstance(obj, collections.abc.Mapping):
        return _rebuild_mapping(obj, [(k, from_transport(v)) for k, v in obj.items()])
    if _is_namedtuple(obj):
        return type(obj)(*(from_transport(v) for v in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(from_transport(v) for v in obj)
    return obj


def to_transport(obj):
    """Replace every cpu minigrad tensor in a (nested) batch by a ``TensorData`` marker, so it can be pickled
    to the main process as a plain NumPy array."""
    if isinstance(obj, Tensor):
        host = _tensor_on_host(obj)
        return TensorData(host if host is not None else obj.detach().cpu().numpy())
    if isinstance(obj, (str, bytes, np.ndarray, TensorData)) or obj is None:
        return obj
    if isinstance(obj, collections.abc.Mapping):
        return _rebuild_mapping(obj, [(k, to_transport(v)) for k, v in obj.items()])
    if _is_namedtuple(obj):
        return type(obj)(*(to_transport(v) for v in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_transport(v) for v in obj)
    return obj


def default_collate(batch):
    """Merge a list of samples into a batch (see the module docstring for the rules).

    >>> x, y = default_collate([(np.zeros(3, np.float32), 1), (np.ones(3, np.float32), 0)])
    >>> x.shape, y.dtype    # ((2, 3), minigrad.int64)
    """
    return from_transport(collate_arrays(batch))


def default_convert(data):
    """What DataLoader does to each sample when automatic batching is off (``batch_size=None``): NumPy
    arrays become tensors (without a copy where possible), containers are converted element-wise, anything
    else is left alone."""
    return from_transport(convert_arrays(data))
