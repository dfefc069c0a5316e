"""Indexing: ``x[idx]`` with ints, slices, None, Ellipsis, boolean and integer arrays; gather; setitem.

The backward of advanced indexing scatter-ADDS, so repeated indices accumulate their gradients.
"""
import numbers

from ..autograd.function import Function


def scatter_add(xp, target, index, values):
    """target[index] += values, accumulating repeated indices (np.add.at / cupyx.scatter_add)."""
    if xp.__name__ != "numpy":  # pragma: no cover - GPU only
        import cupyx
        cupyx.scatter_add(target, index, values)
    elif getattr(index, "ndim", 0) == 1 and index.dtype.kind in "iu" and index.size \
            and values.shape == index.shape + target.shape[1:]:
        _scatter_rows(xp, target, index, values)
    else:
        xp.add.at(target, index, values)


def _scatter_rows(xp, target, index, values):
    """Whole rows (an embedding's gradient): sort the indices, sum each run of equal ones with one
    ``add.reduceat``, add the sums to the (now unique) rows. 2-5x faster than ``np.add.at`` on rows."""
    index = xp.where(index < 0, index + target.shape[0], index)    # -1 and n-1 are the same row
    order = xp.argsort(index, kind="stable")
    rows = index[order]
    starts = xp.flatnonzero(xp.concatenate(([True], rows[1:] != rows[:-1])))
    target[rows[starts]] += xp.add.reduceat(values[order], starts, axis=0)


def open_grid(xp, shape):
    """Broadcastable aranges, one per dim: ``numpy.indices(shape, sparse=True)`` for any array module."""
    n = len(shape)
    return [xp.arange(size).reshape((1,) * i + (size,) + (1,) * (n - i - 1)) for i, size in enumerate(shape)]


def is_basic(index):
    """True when ``index`` only uses ints, slices, None and Ellipsis (the result is a view)."""
    items = index if isinstance(index, tuple) else (index,)
    return all(i is None or i is Ellipsis or isinstance(i, (numbers.Integral, slice)) for i in items)


class GetItem(Function):
    name = "getitem"

    @staticmethod
    def forward(ctx, a, index):
        ctx.meta = (a.shape, a.dtype, index)
        return a[index]

    @staticmethod
    def backward(ctx, grad):
        shape, dtype, index = ctx.meta
        out = ctx.xp.zeros(shape, dtype=grad.dtype)
        if is_basic(index) or _is_bool_index(index):
            out[index] = grad  # no repeats possible
        else:
            scatter_add(ctx.xp, out, index, grad)
        return out, None


def _is_bool_index(index):
    items = index if isinstance(index, tuple) else (index,)
    arrays = [i for i in items if hasattr(i, "dtype")]
    return bool(arrays) and all(i.dtype.kind == "b" for i in arrays)


class SetItem(Function):
    """Out-of-place ``a[index] = value``: the in-place form rebases onto this (see ops.setitem_)."""
    name = "setitem"

    @staticmethod
    def forward(ctx, a, index, value):
        out = a.copy()
        out[index] = value
        ctx.meta = (index, getattr(value, "shape", ()))
        return out

    @staticmethod
    def backward(ctx, grad):
        index, vshape = ctx.meta
        ga = gv = None
        if ctx.needs_input_grad[0]:
            ga = grad.copy()
            ga[index] = 0
        if ctx.needs_input_grad[2]:
            gv = grad[index]
            if gv.shape != vshape:  # value was broadcast into the slot
                from ..autograd.engine import unbroadcast
                gv = unbroadcast(gv, vshape, ctx, 2)
        return ga, None, gv


class Gather(Function):
    """out[i][j] = a[i][index[i][j]] along ``dim`` (PyTorch's gather)."""

    @staticmethod
    def forward(ctx, a, dim, index):
        full = open_grid(ctx.xp, index.shape)
        full[dim] = index
        ctx.meta = (a.shape, tuple(full))
        return a[tuple(full)]

    @staticmethod
    def backward(ctx, grad):
        shape, full = ctx.meta
        out = ctx.xp.zeros(shape, dtype=grad.dtype)
        scatter_add(ctx.xp, out, full, grad)
        return out, None, None
