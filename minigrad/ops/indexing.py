"""Indexing: ``x[idx]`` with ints, slices, None, Ellipsis, boolean and integer arrays; gather; masked_fill.

The backward of advanced indexing scatter-ADDS, so repeated indices accumulate their gradients. Writing
through an index (``x[idx] = v``) is in ``inplace.py``; its out-of-place form, ``SetItem``, is here.
"""
import numbers

import numpy as np

from ..autograd.extensions import outside_apply
from ..autograd.function import Function
from ..errors import ArgumentError, DeviceError, DTypeError, OpIndexError, ShapeError
from ..tensor_base import TensorBase as Tensor  # every Tensor is one (tensor.py imports ops)
from ._args import as_tensor_like, dim_of, share_version, wrap
from ._rules import const, linear


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


def _is_bool_index(index):
    items = index if isinstance(index, tuple) else (index,)
    arrays = [i for i in items if hasattr(i, "dtype")]
    return bool(arrays) and all(i.dtype.kind == "b" for i in arrays)


def convert_index(index, ref):
    """A user's index (tensors, lists, arrays, ints, slices...) as an index into ``ref``'s array."""
    items = index if isinstance(index, tuple) else (index,)
    out = []
    for i in items:
        if isinstance(i, Tensor):
            if i.array.dtype.kind not in "iub":
                raise DTypeError(f"index: tensors used as indices must be integer or bool, got {i.dtype}")
            if i.device != ref.device:
                raise DeviceError(f"index: index on {i.device} for a tensor on {ref.device}")
            out.append(i.array)
        elif isinstance(i, (list, np.ndarray)):
            arr = np.asarray(i)
            if arr.dtype.kind not in "iub" and arr.size:
                raise DTypeError(f"index: arrays used as indices must be integer or bool, got {arr.dtype}")
            out.append(ref.device.backend.asarray(arr.astype(np.int64) if arr.dtype.kind == "f" or
                                                  (arr.size == 0 and arr.dtype.kind != "b") else arr))
        elif isinstance(i, float):
            raise DTypeError(f"index: float index {i} (only integers, slices, None, Ellipsis, bool and "
                             f"integer tensors are valid)")
        else:
            out.append(i)
    return tuple(out) if isinstance(index, tuple) else out[0]


# --- getitem, setitem ------------------------------------------------------------------------------
def _into_zeros(xp, shape, index, values):
    """Zeros of ``shape`` with ``values`` added at ``index`` (repeated indices summed)."""
    out = xp.zeros(shape, dtype=values.dtype)
    if is_basic(index) or _is_bool_index(index):
        out[index] = values  # no repeats possible
    else:
        scatter_add(xp, out, index, values)
    return out


class GetItem(Function):
    name = "getitem"

    @staticmethod
    def forward(ctx, a, *, index):
        ctx.in_shape, ctx.index = a.shape, index
        return a[index]

    @staticmethod
    def backward(ctx, grad):
        return _into_zeros(ctx.xp, ctx.in_shape, ctx.index, grad)

    @staticmethod
    def vjp(ctx, grad):
        return IndexScatter.apply(grad, in_shape=ctx.in_shape, index=ctx.index)

    jvp = linear


class IndexScatter(Function):
    """The gradient of ``getitem`` as an op of its own: ``grad`` added into zeros of the input's shape at
    ``index`` (repeats summed). Linear, and its own backward is ``getitem``: gradients of gradients."""
    name = "getitem_backward"

    @staticmethod
    def forward(ctx, grad, *, in_shape, index):
        ctx.index = index
        return _into_zeros(ctx.xp, in_shape, index, grad)

    @staticmethod
    def backward(ctx, grad):
        return grad[ctx.index]

    @staticmethod
    def vjp(ctx, grad):
        return GetItem.apply(grad, index=ctx.index)

    jvp = linear


def getitem(a, index):
    """``a[index]``: a view (sharing the version counter) for basic indices, a copy for advanced ones."""
    index = convert_index(index, a)
    out = GetItem.apply(a, index=index)
    if is_basic(index):
        share_version(out, a)
    return out


class SetItem(Function):
    """Out-of-place ``a[index] = value``: the in-place form rebases onto this (see inplace.setitem_)."""
    name = "setitem"

    @staticmethod
    def forward(ctx, a, value, *, index):
        out = a.copy()
        out[index] = value
        ctx.index, ctx.value_shape = index, getattr(value, "shape", ())
        return out

    @staticmethod
    def backward(ctx, grad):
        index = ctx.index
        ga = gv = None
        if ctx.needs_input_grad[0]:
            ga = grad.copy()
            ga[index] = 0
        if ctx.needs_input_grad[1]:
            gv = grad[index]
            if gv.shape != ctx.value_shape:  # value was broadcast into the slot
                from ..autograd.engine import unbroadcast
                gv = unbroadcast(gv, ctx.value_shape, ctx, 1)
        return ga, gv

    @staticmethod
    def vjp(ctx, grad):
        ga = SetItem.apply(grad, 0.0, index=ctx.index) if ctx.needs_input_grad[0] else None
        gv = GetItem.apply(grad, index=ctx.index) if ctx.needs_input_grad[1] else None
        return ga, gv   # gv: the engine sums it back to a broadcast value's shape

    @staticmethod
    def jvp(primals, tangents, out, index):
        ta, tv = tangents
        if ta is None:
            ta = const(out, out.device.xp.zeros_like(out.array))
        return SetItem.apply(ta, 0.0 if tv is None else tv, index=index)


# --- gather, masked_fill, one_hot ------------------------------------------------------------------
class Gather(Function):
    """out[i][j] = a[i][index[i][j]] along ``dim`` (PyTorch's gather)."""

    @staticmethod
    def forward(ctx, a, index, *, dim):
        full = open_grid(ctx.xp, index.shape)
        full[dim] = index
        ctx.in_shape, ctx.full_index = a.shape, tuple(full)
        return a[ctx.full_index]

    @staticmethod
    def backward(ctx, grad):
        out = ctx.xp.zeros(ctx.in_shape, dtype=grad.dtype)
        scatter_add(ctx.xp, out, ctx.full_index, grad)
        return out, None

    @staticmethod
    def vjp(ctx, grad):
        return IndexScatter.apply(grad, in_shape=ctx.in_shape, index=ctx.full_index), None

    @staticmethod
    def jvp(primals, tangents, out, dim):
        return Gather.apply(tangents[0], primals[1], dim=dim)


def _check_gather(a, dim, index):
    if not isinstance(index, Tensor) or index.array.dtype.kind not in "iu":
        raise DTypeError(f"gather: index must be an integer tensor, got "
                         f"{index.dtype if isinstance(index, Tensor) else type(index).__name__}")
    if index.ndim != a.ndim:
        raise ShapeError(f"gather: index has {index.ndim} dims but input has {a.ndim} "
                         f"(shapes {tuple(index.shape)}, {tuple(a.shape)})")
    for d in range(a.ndim):
        if d != dim and index.shape[d] > a.shape[d]:
            raise ShapeError(f"gather: index shape {tuple(index.shape)} is larger than input shape "
                             f"{tuple(a.shape)} in dim {d}")
    if index.numel() and (int(index.array.min()) < -a.shape[dim] or int(index.array.max()) >= a.shape[dim]):
        raise OpIndexError(f"gather: index out of range [{int(index.array.min())}, {int(index.array.max())}] "
                           f"for dim {dim} of size {a.shape[dim]}")


def gather(a, dim, index):
    dim = dim_of(a, dim, "gather")
    _check_gather(a, dim, index)
    return Gather.apply(a, index, dim=dim)


class MaskedFill(Function):
    @staticmethod
    def forward(ctx, a, mask, *, value):
        ctx.save_for_backward(mask)
        return ctx.xp.where(mask, ctx.xp.asarray(value, dtype=a.dtype), a)

    @staticmethod
    def backward(ctx, grad):
        mask, = ctx.saved_tensors
        return ctx.xp.where(mask, grad.dtype.type(0), grad), None

    @staticmethod
    def vjp(ctx, grad):
        mask, = ctx.saved_tensors
        return MaskedFill.apply(grad, mask, value=0.0), None

    @staticmethod
    def jvp(primals, tangents, out, value):
        return MaskedFill.apply(tangents[0], primals[1], value=0.0)


def masked_fill(a, mask, value):
    """``value`` (a number or a one-element tensor) where the bool ``mask`` (broadcast to ``a``) holds."""
    mask = mask if isinstance(mask, Tensor) else as_tensor_like(mask, a)
    if mask.array.dtype.kind != "b":
        raise DTypeError(f"masked_fill: mask must be a bool tensor, got {mask.dtype}")
    if isinstance(value, Tensor):
        if value.numel() != 1:
            raise ShapeError("masked_fill: value must be a number or a 0-dim tensor")
        value = value.item()
    try:
        np.broadcast_shapes(tuple(mask.shape), tuple(a.shape))
    except ValueError:
        raise ShapeError(f"masked_fill: mask of shape {tuple(mask.shape)} does not broadcast to the "
                         f"tensor's shape {tuple(a.shape)}") from None
    return MaskedFill.apply(a, mask, value=value)


@outside_apply
def one_hot(t, num_classes=-1):
    """(…,) int64 class indices -> (…, num_classes) int64 one-hot rows (no gradient)."""
    if t.array.dtype.kind not in "iu":
        raise DTypeError(f"one_hot: expects an integer tensor of class indices, got {t.dtype}")
    xp = t.device.xp
    if num_classes < 0:
        num_classes = int(t.array.max()) + 1 if t.numel() else 0
    if t.numel() and (int(t.array.min()) < 0 or int(t.array.max()) >= num_classes):
        raise OpIndexError(f"one_hot: class values must be in [0, {num_classes}), got "
                           f"[{int(t.array.min())}, {int(t.array.max())}]")
    return wrap((t.array[..., None] == xp.arange(num_classes)).astype(np.int64), t.device)


# --- index_select, scatter, repeat_interleave, nonzero: composed from the ops above -----------------
def _int_tensor(t, op, what="index"):
    if not isinstance(t, Tensor) or t.array.dtype.kind not in "iu":
        raise DTypeError(f"{op}: {what} must be an integer tensor, got "
                         f"{t.dtype if isinstance(t, Tensor) else type(t).__name__}")
    return t


def index_select(input, dim, index):
    """The slices of ``input`` along ``dim`` at the 1-D ``index`` (a copy; its gradient scatter-adds)."""
    dim = dim_of(input, dim, "index_select") if input.ndim else 0
    _int_tensor(index, "index_select")
    if index.ndim > 1:
        raise ShapeError(f"index_select: index must be 0-D or 1-D, got shape {tuple(index.shape)}")
    n = input.shape[dim] if input.ndim else 1
    if index.numel() and (int(index.array.min()) < -n or int(index.array.max()) >= n):
        raise OpIndexError(f"index_select: index out of range [{int(index.array.min())}, "
                           f"{int(index.array.max())}] for dim {dim} of size {n}")
    return getitem(input, (slice(None),) * dim + (index.reshape(-1),))


def scatter(input, dim, index, src=None, *, value=None, reduce=None):
    """Out of place ``out[... index[i][j] ...] = src[i][j]`` along ``dim`` (PyTorch's scatter); ``src`` a
    tensor or a number (or ``value=``); ``reduce='add'`` / ``'multiply'`` combine instead of overwriting.
    Differentiable in ``input`` and ``src`` (a SetItem; 'add': an IndexScatter added), except 'multiply'."""
    if src is None:
        src = value
    elif value is not None:
        raise ArgumentError("scatter: give src or value, not both")
    if src is None:
        raise ArgumentError("scatter: missing src (a tensor) or value (a number)")
    dim = dim_of(input, dim, "scatter")
    _check_scatter(input, dim, _int_tensor(index, "scatter"), src)
    xp = input.device.xp
    full = open_grid(xp, index.shape)
    full[dim] = index.array
    full = tuple(full)
    if isinstance(src, Tensor):
        src = src[tuple(slice(0, n) for n in index.shape)] if src.shape != index.shape else src
    if reduce is None:
        return SetItem.apply(input, src, index=full)
    if reduce == "add":
        vals = src if isinstance(src, Tensor) else wrap(xp.full(index.shape, src, dtype=input.array.dtype),
                                                        input.device)
        return input + IndexScatter.apply(vals, in_shape=input.shape, index=full)
    if reduce == "multiply":
        from ..autograd import grad_mode
        if grad_mode.is_grad_enabled() and (input.requires_grad or getattr(src, "requires_grad", False)):
            raise ArgumentError("scatter: reduce='multiply' is not differentiable (as in PyTorch); use it "
                                "under mg.no_grad()")
        out = input.array.copy()
        xp.multiply.at(out, full, src.array if isinstance(src, Tensor) else src)
        return wrap(out, input.device)
    raise ArgumentError(f"scatter: reduce must be None, 'add' or 'multiply', got {reduce!r}")


def _check_scatter(input, dim, index, src):
    shapes = f"(input {tuple(input.shape)}, index {tuple(index.shape)}"
    if index.ndim != input.ndim or isinstance(src, Tensor) and src.ndim != input.ndim:
        raise ShapeError(f"scatter: index{' and src' if isinstance(src, Tensor) else ''} must have as many "
                         f"dims as input {shapes}{', src %s' % (tuple(src.shape),) if isinstance(src, Tensor) else ''})")
    for d in range(input.ndim):
        if (d != dim and index.shape[d] > input.shape[d]) or \
                (isinstance(src, Tensor) and index.shape[d] > src.shape[d]):
            raise ShapeError(f"scatter: index is larger than input (outside dim {dim}) or src in dim {d} {shapes})")
    if isinstance(src, Tensor) and src.dtype != input.dtype:
        raise DTypeError(f"scatter: src ({src.dtype}) must have input's dtype ({input.dtype})")
    if not isinstance(src, Tensor) and not isinstance(src, (int, float)):
        raise ArgumentError(f"scatter: src must be a tensor or a number, got {type(src).__name__}")
    if index.numel() and (int(index.array.min()) < 0 or int(index.array.max()) >= input.shape[dim]):
        raise OpIndexError(f"scatter: index out of range [{int(index.array.min())}, {int(index.array.max())}] "
                           f"for dim {dim} of size {input.shape[dim]}")


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Each element (dim=None: of the flattened input) or slice along ``dim`` repeated ``repeats`` times
    (an int, or a tensor of one count per slice); ``repeat_interleave(counts)`` repeats ``arange``."""
    if repeats is None:                         # torch.repeat_interleave(repeats)
        repeats, input = _int_tensor(input, "repeat_interleave", "repeats"), None
    if input is not None and dim is None:
        input, dim = input.reshape(-1), 0
    n = repeats.numel() if input is None else input.shape[dim_of(input, dim, "repeat_interleave")]
    if isinstance(repeats, Tensor):
        _int_tensor(repeats, "repeat_interleave", "repeats")
        if repeats.ndim > 1 or repeats.numel() not in (1, n):
            raise ShapeError(f"repeat_interleave: repeats must have 1 or {n} elements, got shape "
                             f"{tuple(repeats.shape)}")
        counts = repeats.device.backend.to_host(repeats.array).reshape(-1)
    elif isinstance(repeats, int) and not isinstance(repeats, bool):
        counts = np.array([repeats])
    else:
        raise ArgumentError(f"repeat_interleave: repeats must be an int or a tensor, got {type(repeats).__name__}")
    if counts.size and counts.min() < 0:
        raise ArgumentError(f"repeat_interleave: repeats must be non-negative, got {counts.min()}")
    idx = np.repeat(np.arange(n), counts if counts.size == n else int(counts[0]))
    if output_size is not None and output_size != idx.size:
        raise ShapeError(f"repeat_interleave: output_size={output_size} but the repeats make {idx.size}")
    if input is None:
        return wrap(repeats.device.backend.asarray(idx.astype(np.int64)), repeats.device)
    return getitem(input, (slice(None),) * dim_of(input, dim, "repeat_interleave") + (idx,))


@outside_apply
def nonzero(input, *, as_tuple=False):
    """The indices of the non-zero elements: an (n, ndim) int64 tensor, or (as_tuple) one 1-D tensor per dim."""
    xp = input.device.xp
    if as_tuple:
        return tuple(wrap(i.astype(np.int64), input.device) for i in xp.nonzero(xp.atleast_1d(input.array)))
    return wrap(xp.argwhere(input.array).astype(np.int64), input.device)


class IndexingMethods:
    """Tensor's indexing (``x[i]``, ``gather``, ``masked_fill``...): a mixin of ``Tensor``."""
    __slots__ = ()
    __getitem__ = getitem
    gather, masked_fill, index_select, scatter = gather, masked_fill, index_select, scatter
    repeat_interleave, nonzero = repeat_interleave, nonzero
