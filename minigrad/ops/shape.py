"""Shape ops. Most are views: they share storage (and the version counter) with their input.

``view(dtype)`` reinterprets the bytes, as in PyTorch: a view without a gradient.
"""
import itertools
import math

from ..autograd import grad_mode
from ..autograd.extensions import outside_apply
from ..autograd.function import Function
from ..backend import dtypes
from ..errors import ArgumentError, AutogradError, OpIndexError, ShapeError
from ..tensor_base import TensorBase as Tensor  # every Tensor is one (tensor.py imports ops)
from ._args import dim_arg, dim_of, norm_dim, norm_dims, shape_arg, share_version, wrap
from ._rules import linear, zeros_for
from .elementwise import clone
from .indexing import getitem
from .shape_copy import (  # noqa: F401  (re-exported: ops/__init__.py, the mixin below)
    Pad, Repeat, Roll, Tril, Flip, pad, repeat, roll, tril, triu, flip)


# --- reshape and views -----------------------------------------------------------------------------
class Reshape(Function):
    @staticmethod
    def forward(ctx, a, *, shape):
        ctx.in_shape = a.shape
        return a.reshape(shape)

    @staticmethod
    def backward(ctx, grad):
        return grad.reshape(ctx.in_shape)

    vjp = backward
    jvp = linear


def reshape(a, *shape):
    shape = shape_arg(shape)
    size = a.array.size
    known = math.prod(s for s in shape if s != -1)
    if shape.count(-1) > 1 or (shape.count(-1) == 0 and known != size) or \
            (shape.count(-1) == 1 and (known == 0 or size % known)):
        raise ShapeError(f"reshape: shape {shape} is invalid for a tensor of shape {tuple(a.shape)} "
                         f"({size} elements)")
    if tuple(shape) == a.shape:
        return a
    return share_version(Reshape.apply(a, shape=shape), a)


@outside_apply
def view(a, *shape):
    """``view(*shape)`` is ``reshape``; ``view(dtype)`` reinterprets the bits (see ``_view_as_dtype``)."""
    if len(shape) == 1 and not isinstance(shape[0], (tuple, list, int)):
        return _view_as_dtype(a, shape[0])
    return reshape(a, *shape)


def _view_as_dtype(a, dtype):
    """The same bytes read as ``dtype`` (PyTorch's ``view(dtype)``): same element size, same shape; else the
    last dim (contiguous) scales by the size ratio. Shares storage and version counter; no gradient."""
    dt = dtypes.to_dtype(dtype)
    src, new = a.array.dtype, dt.np_dtype
    if new == src:
        return a
    if a.requires_grad and grad_mode.is_grad_enabled():
        raise AutogradError(f"view: reinterpreting the bits of a {src} tensor that requires grad as {dt.name} "
                            f"has no gradient; call detach() first (or use .to({dt.name}) to convert values)")
    if new.itemsize != src.itemsize:
        where = f"a tensor of shape {tuple(a.shape)} ({src}) as {dt.name}"
        if a.ndim == 0:
            raise ShapeError(f"view: can't view {where}: a 0-d tensor keeps its element size "
                             f"({src.itemsize} bytes, {dt.name} has {new.itemsize})")
        if a.shape[-1] != 1 and a.array.strides[-1] != src.itemsize:
            raise ShapeError(f"view: can't view {where}: the last dim must be contiguous (stride 1, got "
                             f"{a.array.strides[-1] // src.itemsize}); call contiguous() first")
        if a.shape[-1] * src.itemsize % new.itemsize:
            raise ShapeError(f"view: can't view {where}: the last dim's {a.shape[-1] * src.itemsize} bytes "
                             f"are not a multiple of {dt.name}'s {new.itemsize}")
    try:
        arr = a.array.view(new)
    except ValueError as e:  # NumPy's remaining rules (e.g. the last dim's offset alignment)
        raise ShapeError(f"view: can't view a tensor of shape {tuple(a.shape)} ({src}) as {dt.name}: {e}") \
            from None
    out = wrap(arr, a.device)
    out._version_counter, out._is_view = a._version_counter, True
    return out


class Transpose(Function):
    @staticmethod
    def forward(ctx, a, *, dim0, dim1):
        ctx.dim0, ctx.dim1 = dim0, dim1
        return a.swapaxes(dim0, dim1)

    @staticmethod
    def backward(ctx, grad):
        return grad.swapaxes(ctx.dim0, ctx.dim1)

    @staticmethod
    def vjp(ctx, grad):
        return grad.transpose(ctx.dim0, ctx.dim1)

    jvp = linear


def transpose(a, dim0, dim1):
    d0, d1 = norm_dim(dim0, a.ndim, "transpose"), norm_dim(dim1, a.ndim, "transpose")
    if a.ndim < 2 and d0 == d1:
        return a
    return share_version(Transpose.apply(a, dim0=d0, dim1=d1), a)


swapaxes = transpose


def t(a):
    if a.ndim > 2:
        raise ShapeError(f"t: expects a tensor with <= 2 dimensions, got {a.ndim}")
    return a if a.ndim < 2 else transpose(a, 0, 1)


class Permute(Function):
    @staticmethod
    def forward(ctx, a, *, dims):
        ctx.dims = dims
        return a.transpose(dims)

    @staticmethod
    def backward(ctx, grad):
        inverse = [0] * len(ctx.dims)
        for i, d in enumerate(ctx.dims):
            inverse[d] = i
        return grad.transpose(inverse)

    @staticmethod
    def vjp(ctx, grad):
        return grad.permute(*sorted(range(len(ctx.dims)), key=ctx.dims.__getitem__))

    jvp = linear


def permute(a, *dims):
    dims = shape_arg(dims)
    if sorted(norm_dim(d, a.ndim, "permute") for d in dims) != list(range(a.ndim)):
        raise ShapeError(f"permute: dims {dims} are not a permutation of the {a.ndim} dims of a tensor "
                         f"of shape {tuple(a.shape)}")
    return share_version(Permute.apply(a, dims=tuple(d % a.ndim for d in dims)), a)


class Expand(Function):
    """A broadcast view; the engine's un-broadcasting sums the gradient back."""

    @staticmethod
    def forward(ctx, a, *, shape):
        return ctx.xp.broadcast_to(a, shape)

    @staticmethod
    def backward(ctx, grad):
        return grad

    vjp = backward
    jvp = linear


def expand(a, *sizes):
    sizes = shape_arg(sizes)
    if len(sizes) < a.ndim:
        raise ShapeError(f"expand: the number of sizes ({len(sizes)}) must be >= the number of dims "
                         f"({a.ndim}) of a tensor of shape {tuple(a.shape)}")
    lead = len(sizes) - a.ndim
    shape = []
    for i, s in enumerate(sizes):
        if s == -1:
            if i < lead:
                raise ShapeError("expand: -1 is not allowed for new leading dims")
            s = a.shape[i - lead]
        elif i >= lead and a.shape[i - lead] not in (1, s):
            raise ShapeError(f"expand: cannot expand dim {i - lead} of size {a.shape[i - lead]} to {s} "
                             f"(shape {tuple(a.shape)} → {sizes})")
        shape.append(s)
    return share_version(Expand.apply(a, shape=tuple(shape)), a)


def expand_as(a, other):
    return expand(a, *other.shape)


def broadcast_to(a, shape):
    return expand(a, *shape)


def squeeze(a, dim=None):
    if dim is None:
        shape = tuple(s for s in a.shape if s != 1)
    else:
        dims = norm_dims(dim if isinstance(dim, tuple) else (dim,), a.ndim, "squeeze")
        shape = tuple(s for i, s in enumerate(a.shape) if not (i in dims and s == 1))
    return reshape(a, shape)


def unsqueeze(a, dim):
    if not -a.ndim - 1 <= dim <= a.ndim:
        raise OpIndexError(f"unsqueeze: dim {dim} is out of range for a tensor with {a.ndim} dims")
    dim = dim % (a.ndim + 1)
    return reshape(a, a.shape[:dim] + (1,) + a.shape[dim:])


def flatten(a, start_dim=0, end_dim=-1):
    if a.ndim == 0:
        return reshape(a, 1)
    s = norm_dim(start_dim, a.ndim, "flatten")
    e = norm_dim(end_dim, a.ndim, "flatten")
    if s > e:
        raise ArgumentError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
    return reshape(a, a.shape[:s] + (math.prod(a.shape[s:e + 1]),) + a.shape[e + 1:])


def unflatten(a, dim, sizes):
    dim = dim_of(a, dim, "unflatten")
    return reshape(a, a.shape[:dim] + tuple(sizes) + a.shape[dim + 1:])


# --- joining and splitting -------------------------------------------------------------------------
def _check_tensor_list(tensors, op):
    """``tensors``: a non-empty sequence of Tensors."""
    if not tensors:
        raise ArgumentError(f"{op}: expected a non-empty sequence of tensors")
    if not all(isinstance(x, Tensor) for x in tensors):
        raise ArgumentError(f"{op}: expected a sequence of Tensors")


class Cat(Function):
    @staticmethod
    def forward(ctx, *arrays, dim):
        ctx.sizes = [a.shape[dim] for a in arrays]
        ctx.dim = dim
        return ctx.xp.concatenate(arrays, axis=dim)

    @staticmethod
    def backward(ctx, grad):
        cuts = list(itertools.accumulate(ctx.sizes[:-1]))
        return tuple(ctx.xp.split(grad, cuts, axis=ctx.dim))

    @staticmethod
    def vjp(ctx, grad):
        starts = itertools.accumulate([0] + ctx.sizes[:-1])
        return tuple(grad.narrow(ctx.dim, start, n) for start, n in zip(starts, ctx.sizes))

    @staticmethod
    def jvp(primals, tangents, out, dim):
        return Cat.apply(*zeros_for(tangents, primals), dim=dim)


def cat(tensors, dim=None, *, axis=None):
    tensors = list(tensors)
    _check_tensor_list(tensors, "cat")
    dim = norm_dim(dim_arg(dim, axis, "cat") or 0, tensors[0].ndim, "cat")
    ref = tensors[0].shape
    for i, x in enumerate(tensors):
        if x.ndim != len(ref) or any(s != r for j, (s, r) in enumerate(zip(x.shape, ref)) if j != dim):
            raise ShapeError(f"cat: tensor {i} has shape {tuple(x.shape)}, which does not match "
                             f"{tuple(ref)} outside dim {dim}")
    if len(tensors) == 1:
        return tensors[0]
    return Cat.apply(*tensors, dim=dim)


concatenate = concat = cat


class Stack(Function):
    @staticmethod
    def forward(ctx, *arrays, dim):
        ctx.dim = dim
        ctx.n = len(arrays)
        return ctx.xp.stack(arrays, axis=dim)

    @staticmethod
    def backward(ctx, grad):
        return tuple(ctx.xp.take(grad, i, axis=ctx.dim) for i in range(ctx.n))

    @staticmethod
    def vjp(ctx, grad):
        return tuple(grad[(slice(None),) * ctx.dim + (i,)] for i in range(ctx.n))

    @staticmethod
    def jvp(primals, tangents, out, dim):
        return Stack.apply(*zeros_for(tangents, primals), dim=dim)


def stack(tensors, dim=None, *, axis=None):
    tensors = list(tensors)
    _check_tensor_list(tensors, "stack")
    dim = dim_arg(dim, axis, "stack") or 0
    n = tensors[0].ndim + 1
    if not -n <= dim < n:
        raise OpIndexError(f"stack: dim {dim} is out of range for {n}-dim results")
    for i, x in enumerate(tensors):
        if x.shape != tensors[0].shape:
            raise ShapeError(f"stack: expects each tensor to be equal size, but got {tuple(tensors[0].shape)}"
                             f" at entry 0 and {tuple(x.shape)} at entry {i}")
    return Stack.apply(*tensors, dim=dim % n)


def narrow(a, dim, start, length):
    dim = dim_of(a, dim, "narrow")
    return getitem(a, (slice(None),) * dim + (slice(start, start + length),))


def split(a, split_size_or_sections, dim=0):
    dim = dim_of(a, dim, "split")
    n = a.shape[dim]
    if isinstance(split_size_or_sections, int):
        if split_size_or_sections <= 0:
            raise ArgumentError(f"split: split_size must be positive, got {split_size_or_sections}")
        sizes = [split_size_or_sections] * (n // split_size_or_sections)
        if n % split_size_or_sections:
            sizes.append(n % split_size_or_sections)
    else:
        sizes = list(split_size_or_sections)
        if sum(sizes) != n:
            raise ShapeError(f"split: sections {sizes} do not add up to {n} (dim {dim} of shape "
                             f"{tuple(a.shape)})")
    starts = itertools.accumulate([0] + sizes[:-1])
    return tuple(narrow(a, dim, start, s) for start, s in zip(starts, sizes))


def chunk(a, chunks, dim=0):
    if chunks <= 0:
        raise ArgumentError(f"chunk: chunks must be positive, got {chunks}")
    dim = dim_of(a, dim, "chunk")
    return split(a, max(-(-a.shape[dim] // chunks), 1), dim)


class ShapeMethods:
    """Tensor's views and shape changes (``x.reshape(...)``, ``x.T``), ``contiguous`` and ``stride``: a mixin
    of ``Tensor``."""
    __slots__ = ()
    reshape, view, transpose, swapaxes, permute, t = reshape, view, transpose, transpose, permute, t
    expand, expand_as, broadcast_to, squeeze, unsqueeze = expand, expand_as, broadcast_to, squeeze, unsqueeze
    flatten, unflatten, split, chunk, narrow = flatten, unflatten, split, chunk, narrow
    repeat, tril, triu, flip, roll = repeat, tril, triu, flip, roll

    def view_as(self, other):
        return view(self, other.array.shape)

    @property
    def T(self):
        return permute(self, *reversed(range(self.ndim))) if self.ndim > 1 else self

    @property
    def mT(self):
        return transpose(self, -2, -1)

    def contiguous(self):
        """C-order (row-major) memory: ``self`` if it is already, else a differentiable copy."""
        return self if self.array.flags.c_contiguous else clone(self)

    def stride(self, dim=None):
        """Strides in elements (PyTorch's convention; NumPy's ``.array.strides`` are in bytes)."""
        strides = tuple(s // self.array.itemsize for s in self.array.strides)
        return strides if dim is None else strides[norm_dim(dim, self.ndim, "stride")]
