"""PowerSGD (Vogels et al., 2019): send a rank-r approximation of each gradient matrix instead of the matrix.

For a gradient matrix M (n x m), with error feedback E (what earlier steps' approximations left out):

    M <- M + E                              # error feedback: nothing is lost, only delayed
    P = M Q         all-reduce P (n x r)    # Q (m x r): last step's, or random the first time (same seed)
    P <- orthonormalize(P)
    Q = M^T P       all-reduce Q (m x r)
    M_hat = P Q^T / N                       # the rank-r approximation of the average
    E = M - M_hat

Bytes per matrix: (n + m) r instead of n m. Vectors (biases, norms) and matrices too small to gain are
all-reduced as they are, in one flat buffer. As PyTorch's, plain all-reduce runs for the first
``start_powerSGD_iter`` steps (the early, fast-changing gradients), and Q is reused across steps
(``warm_start``: one power iteration per step refines it). Deliberate difference: Q is orthonormalised by a
QR decomposition, not Gram-Schmidt.
"""
import numpy as np

from ....tensor import Tensor
from ... import collectives
from ...process_group import ReduceOp, _group
from .default_hooks import Future, allreduce_hook

__all__ = ["PowerSGDState", "powerSGD_hook"]


class PowerSGDState:
    """``PowerSGDState(process_group, matrix_approximation_rank=1, start_powerSGD_iter=1000,
    use_error_feedback=True, warm_start=True, random_seed=0)``; ``iter`` counts steps (buckets with
    ``is_last()``)."""

    def __init__(self, process_group, matrix_approximation_rank=1, start_powerSGD_iter=1000,
                 use_error_feedback=True, warm_start=True, random_seed=0):
        self.process_group, self.rank = process_group, int(matrix_approximation_rank)
        self.start_powerSGD_iter = int(start_powerSGD_iter)
        self.use_error_feedback, self.warm_start = use_error_feedback, warm_start
        self.rng = np.random.default_rng(random_seed)  # the same draws on every rank
        self.iter = 0
        self.errors, self.qs = {}, {}  # per bucket index: error feedback; per (bucket, matrix): Q

    def maybe_increase_iter(self, bucket):
        if bucket.is_last():
            self.iter += 1


def _matrices(bucket, rank):
    """(offset, n, m) of the bucket's gradients worth compressing, and the offsets/sizes of the rest."""
    comp, rest, offset = [], [], 0
    for p in bucket.parameters():
        size = p.numel()
        if p.ndim > 1:
            n, m = p.shape[0], size // p.shape[0]
            if (n + m) * rank < n * m:
                comp.append((offset, n, m))
                offset += size
                continue
        rest.append((offset, size))
        offset += size
    return comp, rest


def powerSGD_hook(state, bucket):
    """Compress the bucket's matrices to rank ``state.rank``; the rest is all-reduced uncompressed."""
    group = state.process_group
    if state.iter < state.start_powerSGD_iter:
        state.maybe_increase_iter(bucket)
        return allreduce_hook(group, bucket)
    flat = bucket.buffer()
    xp, device, r, world = flat.device.xp, flat.device, state.rank, (group or _group()).size
    data = flat.array
    b = bucket.index()
    if state.use_error_feedback:
        if b in state.errors:
            data += state.errors[b]
        local = data.copy()
    comp, rest = _matrices(bucket, r)
    # 1. the uncompressed rest: one all-reduce, started now
    rest_buf = Tensor._make(xp.concatenate([data[o:o + n] for o, n in rest]) if rest else xp.zeros(0, data.dtype),
                            device)
    rest_work = collectives.all_reduce(rest_buf, ReduceOp.AVG, group=group, async_op=True) if rest else None
    # 2. P = M Q for every matrix, all-reduced together
    mats = [data[o:o + n * m].reshape(n, m) for o, n, m in comp]
    qs = []
    for i, (o, n, m) in enumerate(comp):
        key = (b, i)
        if key not in state.qs or not state.warm_start:
            state.qs[key] = xp.asarray(state.rng.standard_normal((m, r))).astype(data.dtype)
        qs.append(state.qs[key])
    ps = Tensor._make(xp.concatenate([(M @ Q).reshape(-1) for M, Q in zip(mats, qs)]) if comp
                      else xp.zeros(0, data.dtype), device)
    p_work = collectives.all_reduce(ps, ReduceOp.SUM, group=group, async_op=True)

    def finish():
        if comp:
            p_work.wait()
            P, offset = [], 0
            for o, n, m in comp:
                P.append(xp.linalg.qr(ps.array[offset:offset + n * r].reshape(n, r))[0])
                offset += n * r
            q_flat = Tensor._make(xp.concatenate([(M.T @ p).reshape(-1) for M, p in zip(mats, P)]), device)
            collectives.all_reduce(q_flat, ReduceOp.SUM, group=group)
            offset = 0
            for i, ((o, n, m), p) in enumerate(zip(comp, P)):
                Q = q_flat.array[offset:offset + m * r].reshape(m, r)
                offset += m * r
                state.qs[(b, i)] = Q.copy()
                data[o:o + n * m] = (p @ Q.T / world).reshape(-1)
        if rest_work is not None:
            rest_work.wait()
            offset = 0
            for o, n in rest:
                data[o:o + n] = rest_buf.array[offset:offset + n]
                offset += n
        if state.use_error_feedback:
            state.errors[b] = local - data
        state.maybe_increase_iter(bucket)
        return flat

    return Future(p_work, finish)
