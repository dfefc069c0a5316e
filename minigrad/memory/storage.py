"""CPU storage from the pool: NumPy arrays that view pool blocks, returned when the last view dies.

The difficulty is knowing when "the last view dies". NumPy collapses ``.base`` chains: a slice of a slice
of ``arena`` has ``base is arena``, so a finalizer on an intermediate view fires while other views still
use the memory. The fix is to put one small *owner* object per block at the bottom of the chain:

    owner = _BlockOwner()  exposing __array_interface__ = {data: block address, shape, typestr}
    root = np.asarray(owner)              # root.base is owner
    root[1:].T.reshape(...)               # every view's .base collapses to root (NumPy stops collapsing
                                          # at a base of another type), and root holds owner

So the owner lives exactly as long as some array uses the memory, and its ``__del__`` (cheaper than
``weakref.finalize``, same timing) is the moment to give the block back. ``.base`` is therefore either
the owner (the root array) or the root array (every view): a two-step check tells pool storage apart.
The owner also holds the segment's arena, so the memory stays valid even if the allocator were discarded.

``NumpyStorage`` is what ``minigrad.memory.enable('cpu')`` installs as the cpu backend's ``allocator``:
``empty(shape, dtype)`` for factories, ``adopt(array)`` for arrays an op computed (copied into a block
unless they already view one). Its ``current_op`` attribute is the hook ``op_labels.py`` sets to label
allocations (see ``minigrad.memory``).
"""
import sys

import numpy as np

from .history import OpLabelled

_POOLABLE_KINDS = frozenset("biufc")   # bool, ints, floats, complex: plain bytes, no Python objects


class _BlockOwner:
    """The base of every array viewing one block; returns the block to the pool when it dies."""

    __slots__ = ("__array_interface__", "block", "allocator", "arena")

    def __del__(self):
        try:
            self.allocator.free(self.block)
        except Exception:
            if not sys.is_finalizing():     # at interpreter exit there is nothing left to return to
                raise


class NumpyStorage(OpLabelled):
    """The cpu backend's allocator: every tensor's storage is a NumPy array viewing a pool block."""

    def __init__(self, allocator):
        super().__init__()          # current_op: recorded as the cause of allocations (per thread)
        self.allocator = allocator
        self._dtypes = {}           # dtype -> (array-interface typestr, itemsize, view dtype or None); typestr
        #                             '' if unpoolable; bfloat16 (ml_dtypes, kind "V") is made as uint16, then viewed

    def empty(self, shape, dtype):
        """An uninitialised array of ``shape``/``dtype`` viewing a fresh pool block."""
        info = self._dtypes.get(dtype) or self._learn_dtype(dtype)
        typestr, nbytes, view = info
        if type(shape) is not tuple:
            shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        for n in shape:
            nbytes *= n
        if nbytes <= 0 or not typestr:   # zero-size arrays need no memory (as in PyTorch); objects can't
            return np.empty(shape, dtype)
        block = self.allocator.malloc(int(nbytes), self.current_op)
        owner = _BlockOwner()
        owner.__array_interface__ = {"data": (block.address, False), "shape": shape,
                                     "typestr": typestr, "version": 3}
        owner.block = block
        owner.allocator = self.allocator
        owner.arena = block.segment.handle
        return np.asarray(owner) if view is None else np.asarray(owner).view(view)

    def adopt(self, array):
        """Make ``array`` pool storage: unchanged if it already views a pool block, else copied into one."""
        base = array.base
        if base is not None:
            if type(base) is np.ndarray:    # a view: its base is the root array, whose base is the owner
                base = base.base
            if type(base) is _BlockOwner:
                return array
        if type(array) is not np.ndarray:
            return array
        if base is None and getattr(self.allocator, "tight", False) and array.flags.c_contiguous and array.nbytes:
            return self._borrow(array)
        out = self.empty(array.shape, array.dtype)
        if type(out.base) is not _BlockOwner:   # not poolable (zero size, object dtype): keep the original
            return array
        np.copyto(out, array)
        return out

    def _borrow(self, array):
        """A tight pool takes NumPy's own array over as a segment of its own (``allocator.borrow``) instead
        of copying it into a block: no second copy at any moment. The owner keeps ``array`` alive."""
        typestr, _, view = self._dtypes.get(array.dtype) or self._learn_dtype(array.dtype)
        if not typestr:
            return array
        address = array.__array_interface__["data"][0]
        block = self.allocator.borrow(array.nbytes, address, array, self.current_op)
        owner = _BlockOwner()
        owner.__array_interface__ = {"data": (address, False), "shape": array.shape, "typestr": typestr,
                                     "version": 3}
        owner.block, owner.allocator, owner.arena = block, self.allocator, array
        return np.asarray(owner) if view is None else np.asarray(owner).view(view)

    def _learn_dtype(self, dtype):
        dt = np.dtype(dtype)
        typestr = dt.str if dt.kind in _POOLABLE_KINDS and dt.fields is None else ""
        view = None
        if dt.kind == "V" and dt.fields is None and dt.itemsize == 2:   # bfloat16: its bits are a uint16
            typestr, view = "<u2", dt
        info = (typestr, dt.itemsize, view)
        self._dtypes[dtype] = self._dtypes[dt] = info
        return info


def _owner_of(array):
    base = getattr(array, "base", None)
    if type(base) is np.ndarray:
        base = base.base
    return base if type(base) is _BlockOwner else None


def views_pool_block(array):
    """True when ``array``'s memory belongs to a pool block (the check adopt makes)."""
    return _owner_of(array) is not None


def block_of(array):
    """The pool block an array views (None if it does not view one)."""
    owner = _owner_of(array)
    return None if owner is None else owner.block
