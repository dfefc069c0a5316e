"""PipelineStage: one rank's slice of the model, and the point-to-point traffic with its neighbours.

Stage s runs its submodule on micro-batches: forward receives the activation from stage s-1 (the first
stage gets the input), runs, and sends the output to stage s+1; backward receives the gradient of that
output from stage s+1 (the last stage starts from the loss), runs backward, and sends the gradient of its
input to stage s-1. Sends are nonblocking (``isend``, waited for at the end of the step), receives block with
the group's deadline, so a dead neighbour is named, never waited for forever.

Shapes travel once per step: before the first activation, a small metadata message (dtype, shape) tells
the next stage what to allocate; every micro-batch of a step must then have that shape. ``timeline`` records
each action as ``{"action": "F"|"B", "mb", "start", "end", "wait"}`` (``wait``: seconds blocked receiving
before it), which is what the bubble is measured from.
"""
import time

import numpy as np

from ...autograd.grad_mode import no_grad
from ...creation import empty, zeros
from ...tensor import Tensor, tensor
from ...errors import ArgumentError, ShapeError
from .. import collectives
from ..process_group import ReduceOp, _group

__all__ = ["PipelineStage", "average_gradients"]

_DTYPES = ["float16", "float32", "float64", "int32", "int64", "bool"]
_META = 10  # metadata message: [dtype index, ndim, dims...]


class PipelineStage:
    """``PipelineStage(submodule, stage_index, num_stages, device=None, group=None)``: stage ``stage_index``
    runs on the rank with that index in ``group`` (None: the world), one stage per rank."""

    def __init__(self, submodule, stage_index, num_stages, device=None, group=None):
        g = _group() if group is None else group
        if num_stages != g.size:
            raise ArgumentError(f"PipelineStage: num_stages={num_stages}, but the pipeline group has {g.size} "
                                f"ranks (one stage per rank)")
        if stage_index != g.rank:
            raise ArgumentError(f"PipelineStage: stage_index={stage_index} on the rank with index {g.rank} in the "
                                f"pipeline group; stage s must run on group rank s")
        self.submod, self.group = submodule, group
        self.stage_index, self.num_stages = stage_index, num_stages
        self.device = device or "cpu"
        self.is_first, self.is_last = stage_index == 0, stage_index == num_stages - 1
        self.prev = g.ranks[stage_index - 1] if not self.is_first else None
        self.next = g.ranks[stage_index + 1] if not self.is_last else None
        self.timeline = []
        self._reset()

    def _reset(self):
        self._stash, self._sends, self._meta = {}, [], None
        self.timeline = []

    # --- point to point ------------------------------------------------------------------------------
    def _send(self, tensor, dst, tag):
        t = tensor.detach().contiguous()
        self._sends.append((collectives.isend(t, dst, group=self.group, tag=tag), t))  # keep t until done

    def _recv(self, shape, dtype, src, tag):
        buf = empty(*shape, dtype=dtype, device=self.device)
        collectives.irecv(buf, src, group=self.group, tag=tag).wait()
        return buf

    def _send_meta(self, out):
        if self._meta is None:
            if out.ndim > _META - 2 or out.dtype.name not in _DTYPES:
                raise ShapeError(f"PipelineStage {self.stage_index}: cannot send a {out.dtype.name} activation "
                                 f"of shape {tuple(out.shape)}")
            meta = np.zeros(_META, np.int64)
            meta[:2 + out.ndim] = [_DTYPES.index(out.dtype.name), out.ndim, *out.shape]
            self._meta = (tuple(out.shape), out.dtype.name)
            self._send(tensor(meta, device=self.device), self.next, 0)
        elif (tuple(out.shape), out.dtype.name) != self._meta:
            raise ShapeError(f"PipelineStage {self.stage_index}: micro-batch output {tuple(out.shape)} "
                             f"{out.dtype.name} differs from the step's first {self._meta}; all micro-batches of "
                             f"a step must have one shape")

    def _recv_meta(self):
        if self._meta is None:
            meta = self._recv((_META,), "int64", self.prev, 0).cpu().numpy()
            self._meta = (tuple(int(d) for d in meta[2:2 + meta[1]]), _DTYPES[meta[0]])
        return self._meta

    # --- the two actions -------------------------------------------------------------------------------
    def forward_one_chunk(self, mb, args=(), target=None, loss_fn=None, scale=1.0):
        """Forward of micro-batch ``mb``; on the last stage returns the loss (``loss_fn(output, target)``)."""
        t_wait = time.perf_counter()
        if self.is_first:
            inputs = args
        else:
            shape, dtype = self._recv_meta()
            x = self._recv(shape, dtype, self.prev, 1 + 2 * mb)
            x.requires_grad_(x.is_floating_point())
            inputs = (x,)
        start = time.perf_counter()
        out = self.submod(*inputs)
        loss = None
        if self.is_last:
            loss = loss_fn(out, target) if loss_fn is not None else None
            self._stash[mb] = (inputs, out, loss * scale if loss is not None else None)
        else:
            self._stash[mb] = (inputs, out, None)
        self.timeline.append({"action": "F", "mb": mb, "start": start, "end": time.perf_counter(),
                              "wait": start - t_wait})
        if not self.is_last:
            self._send_meta(out)
            self._send(out, self.next, 1 + 2 * mb)
        return out, loss

    def backward_one_chunk(self, mb):
        """Backward of micro-batch ``mb``: from the loss (last stage) or the gradient stage s+1 sends."""
        inputs, out, scaled_loss = self._stash.pop(mb)
        t_wait = time.perf_counter()
        grad = None if self.is_last else self._recv(tuple(out.shape), out.dtype.name, self.next, 2 + 2 * mb)
        start = time.perf_counter()
        if self.is_last:
            if scaled_loss is None:
                raise ArgumentError("PipelineStage: the last stage needs a loss_fn to run backward")
            scaled_loss.backward()
        else:
            out.backward(grad)
        self.timeline.append({"action": "B", "mb": mb, "start": start, "end": time.perf_counter(),
                              "wait": start - t_wait})
        if not self.is_first:
            x = inputs[0]
            self._send(x.grad if x.grad is not None else zeros(*x.shape, dtype=x.dtype.name, device=self.device),
                       self.prev, 2 + 2 * mb)

    def finish(self):
        """Wait for every send of this step (their buffers may be reused after)."""
        for work, _ in self._sends:
            work.wait()
        self._sends = []


def average_gradients(module, group):
    """DP×PP (or any hand-made data parallelism): average ``module``'s gradients over ``group`` with one
    all-reduce of all of them flattened (after the pipeline step, before the optimizer)."""
    params = [p for p in module.parameters() if p.grad is not None]
    if not params:
        return
    xp, device = params[0].device.xp, params[0].device
    flat = Tensor._make(xp.concatenate([p.grad.array.reshape(-1) for p in params]), device)
    with no_grad():
        collectives.all_reduce(flat, op=ReduceOp.AVG, group=group)
    offset = 0
    for p in params:
        p.grad.array[...] = flat.array[offset:offset + p.numel()].reshape(p.shape)
        offset += p.numel()
