"""Sorting and selection: ``sort``, ``argsort``, ``topk``; and counting: ``unique``, ``bincount``.

The indices are found on the arrays (no gradient: an order is piecewise constant); the values are then
``gather``-ed at them, so the gradient of each value goes back to the element it came from (scattered by
``Gather``'s backward). Ties keep their original order (stable sorts), as PyTorch's ``stable=True``.
NaN sorts as the largest value, as in PyTorch.
"""
import collections

import numpy as np

from ..autograd.extensions import outside_apply
from ..errors import ArgumentError, ShapeError
from ._args import norm_dim, wrap
from .indexing import gather

SortResult = collections.namedtuple("sort", ["values", "indices"])
TopkResult = collections.namedtuple("topk", ["values", "indices"])


def _order(xp, a, axis, descending):
    """Stable argsort along ``axis``; descending keeps ties in their original order too."""
    if a.dtype.kind == "b":
        a = a.astype(np.int8)
    if not descending:
        return xp.argsort(a, axis=axis, kind="stable")
    # descending and stable: sort the reversed array ascending, then map the positions back and reverse
    n = a.shape[axis]
    rev = xp.flip(a, axis)
    idx = xp.argsort(rev, axis=axis, kind="stable")
    return xp.flip(n - 1 - idx, axis)


def _dim(a, dim, op):
    return 0 if a.ndim == 0 else norm_dim(dim, a.ndim, op)


def _select(a, index, dim, result):
    """(values, indices) with values gathered at ``index`` (int64) along ``dim``; 0-d stays 0-d."""
    idx = wrap(index.astype(np.int64, copy=False), a.device)
    if a.ndim == 0:
        return result(a.clone(), idx.reshape(()))
    return result(gather(a, dim, idx), idx)


@outside_apply
def argsort(input, dim=-1, descending=False, stable=False):
    """Indices that sort ``input`` along ``dim`` (ascending, or ``descending``); ties in original order."""
    d = _dim(input, dim, "argsort")
    data = input.array if input.ndim else input.array.reshape(1)
    return wrap(_order(input.device.xp, data, d, descending).astype(np.int64, copy=False)
                .reshape(input.shape), input.device)


@outside_apply
def sort(input, dim=-1, descending=False, stable=False):
    """(values, indices) of ``input`` sorted along ``dim``; differentiable in the values."""
    d = _dim(input, dim, "sort")
    data = input.array if input.ndim else input.array.reshape(1)
    index = _order(input.device.xp, data, d, descending)
    return _select(input, index.reshape(input.shape), d, SortResult)


@outside_apply
def topk(input, k, dim=-1, largest=True, sorted=True):
    """The ``k`` largest (or smallest, ``largest=False``) elements along ``dim``: (values, indices).

    Values come in sorted order (largest first, or smallest first); ``sorted=False`` is accepted and
    gives the same order. Differentiable in the values.
    """
    d = _dim(input, dim, "topk")
    n = input.shape[d] if input.ndim else 1
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise ArgumentError(f"topk: k must be an int, got {k!r}")
    if not 0 <= k <= n:
        raise ShapeError(f"topk: k ({k}) is out of range for dim {d} of size {n} (shape {tuple(input.shape)})")
    xp = input.device.xp
    data = input.array if input.ndim else input.array.reshape(1)
    order = _order(xp, data, d, largest)
    index = xp.take(order, xp.arange(k), axis=d)
    return _select(input, index.reshape(index.shape if input.ndim else ()), d, TopkResult)


@outside_apply
def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct values (dim=None) or slices along ``dim``, sorted (also for ``sorted=False``, as PyTorch
    does on the CPU); with ``return_inverse`` each element's position in them, with ``return_counts`` how
    often each occurs. No gradient (as in PyTorch)."""
    be = input.device.backend
    host = be.to_host(input.array)
    axis = None if dim is None else norm_dim(dim, input.ndim, "unique")
    values, inverse, counts = np.unique(host, return_inverse=True, return_counts=True, axis=axis)
    inverse = inverse.reshape(host.shape if axis is None else (host.shape[axis],))
    out = [wrap(be.asarray(values.astype(host.dtype)), input.device)]
    if return_inverse:
        out.append(wrap(be.asarray(inverse.astype(np.int64)), input.device))
    if return_counts:
        out.append(wrap(be.asarray(counts.astype(np.int64)), input.device))
    return out[0] if len(out) == 1 else tuple(out)


@outside_apply
def bincount(input, weights=None, minlength=0):
    """How often each value 0..max occurs in the 1-D non-negative int ``input`` (at least ``minlength``
    bins); with ``weights``, their sums per value (float32 weights give float32, others float64)."""
    if input.ndim != 1 or input.array.dtype.kind not in "iu":
        raise ShapeError(f"bincount: input must be a 1-D integer tensor, got shape {tuple(input.shape)} "
                         f"({input.dtype})")
    if input.numel() and int(input.array.min()) < 0:
        raise ArgumentError(f"bincount: input must be non-negative, got {int(input.array.min())}")
    if minlength < 0:
        raise ArgumentError(f"bincount: minlength must be non-negative, got {minlength}")
    xp, w = input.device.xp, None
    if weights is not None:
        if tuple(weights.shape) != tuple(input.shape):
            raise ShapeError(f"bincount: weights must have input's shape {tuple(input.shape)}, got "
                             f"{tuple(weights.shape)}")
        w = weights.array.astype(np.float32 if weights.array.dtype == np.float32 else np.float64)
    out = xp.bincount(input.array, weights=w, minlength=minlength)
    return wrap(out.astype(w.dtype if w is not None else np.int64), input.device)


class SortMethods:
    """Tensor's ``sort``, ``argsort`` and ``topk``: a mixin of ``Tensor``."""
    __slots__ = ()
    sort, argsort, topk, unique, bincount = sort, argsort, topk, unique, bincount
