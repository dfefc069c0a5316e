"""Cross-entropy over logits whose vocabulary is split over ranks, without ever gathering them.

Rank r holds logits[..., r*V/N:(r+1)*V/N]. The loss ``log sum_v exp(z_v) - z_target`` needs only two numbers
per position from every rank: its partial sum of exp (after subtracting the global max, for stability) and
its logit of the target if it holds that id. Both are summed with g (``reduce_from_parallel``), so backward
gives each rank exactly its slice of softmax - onehot. Communication per step: three all-reduces of
N·T numbers instead of an all-gather of N·T·V logits (Megatron's vocab-parallel cross-entropy).
"""
from ...autograd.grad_mode import no_grad
from ...errors import ArgumentError, ShapeError
from .. import collectives
from ..process_group import ReduceOp
from .comm_ops import group_rank_size, reduce_from_parallel

__all__ = ["vocab_parallel_cross_entropy"]


def vocab_parallel_cross_entropy(logits, target, group=None, reduction="mean"):
    """Mean (or 'sum', 'none') cross-entropy of vocabulary-sharded ``logits`` (..., V/N) against ``target``
    (...) of global ids in [0, V)."""
    rank, n = group_rank_size(group)
    local_v = logits.shape[-1]
    if tuple(target.shape) != tuple(logits.shape[:-1]):
        raise ShapeError(f"vocab_parallel_cross_entropy: target shape {tuple(target.shape)} does not match logits "
                         f"{tuple(logits.shape)} without their last (vocabulary) dimension")
    if reduction not in ("mean", "sum", "none"):
        raise ArgumentError(f"vocab_parallel_cross_entropy: reduction must be 'mean', 'sum' or 'none', got "
                            f"{reduction!r}")
    xp, t = logits.device.xp, target.array
    if t.size and (t.min() < 0 or t.max() >= local_v * n):
        raise ArgumentError(f"vocab_parallel_cross_entropy: target ids must be in [0, {local_v * n}), got "
                            f"[{int(t.min())}, {int(t.max())}]")
    with no_grad():  # the max only shifts the exponent: the loss does not depend on it
        m = logits.amax(dim=-1, keepdim=True).detach().contiguous()
        collectives.all_reduce(m, op=ReduceOp.MAX, group=group)
    shifted = logits - m
    sum_exp = reduce_from_parallel(shifted.exp().sum(dim=-1), group)
    local = t - rank * local_v
    onehot = xp.zeros(logits.shape, logits.array.dtype)
    inside = (local >= 0) & (local < local_v)
    xp.put_along_axis(onehot, xp.where(inside, local, 0)[..., None], inside[..., None].astype(onehot.dtype), -1)
    picked = reduce_from_parallel((shifted * type(logits)._make(onehot, logits.device)).sum(dim=-1), group)
    loss = sum_exp.log() - picked
    return loss.mean() if reduction == "mean" else loss.sum() if reduction == "sum" else loss
