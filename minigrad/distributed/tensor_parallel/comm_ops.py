"""The four conjugate communication ops of Megatron-style tensor parallelism, each one autograd Function.

    op                       forward                         backward
    copy_to_parallel  (f)    identity                        all-reduce (sum) the gradient
    reduce_from_parallel (g) all-reduce (sum)                identity
    gather_from_parallel     all-gather along the last dim   keep this rank's slice of the gradient
    scatter_to_parallel      keep this rank's slice          all-gather the gradient along the last dim

f and g are conjugate: where forward needs no communication, backward does, and the other way round. A
column-parallel linear layer starts with f (its input is replicated, every rank's slice of the layer adds a
gradient to it); a row-parallel one ends with g (every rank holds a partial sum of the output). Each op takes
``group`` (None: the world) as a keyword, so it gets no gradient edge. The collectives they call are logged
by the group (``dist.comm_log()``): a grader sees which ran, with how many bytes, in which order.
"""
from ...autograd.function import Function
from ...ops._rules import linear
from ...tensor import Tensor
from .. import collectives
from ..process_group import ReduceOp, _group

__all__ = ["copy_to_parallel", "reduce_from_parallel", "gather_from_parallel", "scatter_to_parallel",
           "group_rank_size"]


def group_rank_size(group):
    g = _group() if group is None else group
    return g.rank, g.size


def _all_reduce(ctx, array, op=ReduceOp.SUM):
    out = ctx.xp.ascontiguousarray(array).copy()
    collectives.all_reduce(Tensor._make(out, ctx.device), op=op, group=ctx.group)
    return out


def _all_gather_last(ctx, array):
    """Concatenate every rank's ``array`` along the last dimension."""
    xp, (_, n) = ctx.xp, group_rank_size(ctx.group)
    part = xp.ascontiguousarray(array)
    buf = xp.empty((n,) + part.shape, part.dtype)
    collectives.all_gather_into_tensor(Tensor._make(buf, ctx.device), Tensor._make(part, ctx.device),
                                       group=ctx.group)
    return xp.concatenate(list(buf), axis=-1)


def _my_slice(ctx, array):
    rank, n = group_rank_size(ctx.group)
    width = array.shape[-1]
    if width % n:
        raise ValueError(f"the last dimension ({width}) does not split evenly over {n} ranks")
    k = width // n
    return array[..., rank * k:(rank + 1) * k].copy()


class CopyToParallel(Function):
    @staticmethod
    def forward(ctx, x, group=None):
        ctx.group = group
        return x.view()

    @staticmethod
    def backward(ctx, grad):
        return _all_reduce(ctx, grad)

    @staticmethod
    def vjp(ctx, grad):   # its conjugate, as an op: gradients of any order
        return ReduceFromParallel.apply(grad, group=ctx.group)

    jvp = linear


class ReduceFromParallel(Function):
    @staticmethod
    def forward(ctx, x, group=None):
        ctx.group = group
        return _all_reduce(ctx, x)

    @staticmethod
    def backward(ctx, grad):
        return grad

    @staticmethod
    def vjp(ctx, grad):   # its conjugate, as an op: gradients of any order
        return CopyToParallel.apply(grad, group=ctx.group)

    jvp = linear


class GatherFromParallel(Function):
    @staticmethod
    def forward(ctx, x, group=None):
        ctx.group = group
        return _all_gather_last(ctx, x)

    @staticmethod
    def backward(ctx, grad):
        return _my_slice(ctx, grad)

    @staticmethod
    def vjp(ctx, grad):   # its conjugate, as an op: gradients of any order
        return ScatterToParallel.apply(grad, group=ctx.group)

    jvp = linear


class ScatterToParallel(Function):
    @staticmethod
    def forward(ctx, x, group=None):
        ctx.group = group
        return _my_slice(ctx, x)

    @staticmethod
    def backward(ctx, grad):
        return _all_gather_last(ctx, grad)

    @staticmethod
    def vjp(ctx, grad):   # its conjugate, as an op: gradients of any order
        return GatherFromParallel.apply(grad, group=ctx.group)

    jvp = linear


def copy_to_parallel(x, group=None):
    """Identity forward, all-reduce backward (Megatron's f)."""
    return CopyToParallel.apply(x, group=group)


def reduce_from_parallel(x, group=None):
    """All-reduce forward, identity backward (Megatron's g)."""
    return ReduceFromParallel.apply(x, group=group)


def gather_from_parallel(x, group=None):
    """All-gather along the last dimension forward; this rank's slice of the gradient backward."""
    return GatherFromParallel.apply(x, group=group)


def scatter_to_parallel(x, group=None):
    """This rank's slice of the last dimension forward; all-gather of the gradient backward."""
    return ScatterToParallel.apply(x, group=group)
