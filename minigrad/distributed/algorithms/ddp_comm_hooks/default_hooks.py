"""The plain all-reduce hook and fp16 compression, and the small future a hook returns.

A hook is ``hook(state, bucket) -> Future``: it starts the bucket's communication and returns at once (DDP
keeps running backward); DDP calls ``future.wait()`` at the end of backward and copies the tensor it gives
(the averaged flat gradients) back into ``.grad``. minigrad has no ``torch.futures``: ``Future`` here wraps
the Work in flight and the step that turns its result into the value.
"""
import time

from ....tensor import Tensor
from ... import collectives
from ...process_group import ReduceOp

__all__ = ["Future", "allreduce_hook", "fp16_compress_hook"]


class Future:
    """``Future(work, then)``: ``wait()`` waits for ``work`` then returns ``then()`` (computed once)."""

    def __init__(self, work, then):
        self._work, self._then, self._done, self._value = work, then, False, None
        self.issued_at, self.completed_at = work.issued_at, None

    def is_completed(self):
        return self._done or self._work.is_completed()

    def wait(self):
        if not self._done:
            self._work.wait()
            self._value, self._done = self._then(), True
            self.completed_at = time.perf_counter()
        return self._value

    value = wait


def _group_size(group):
    from ...process_group import _group
    return (group or _group()).size


def allreduce_hook(process_group, bucket):
    """What DDP does without a hook: average the bucket with one all-reduce."""
    flat = bucket.buffer()
    work = collectives.all_reduce(flat, ReduceOp.AVG, group=process_group, async_op=True)
    return Future(work, lambda: flat)


def fp16_compress_hook(process_group, bucket):
    """Cast the bucket to float16, divided by the world size first (so the sum cannot overflow where the mean
    would not), all-reduce (half the bytes), and cast back."""
    flat = bucket.buffer()
    half = Tensor._make((flat.array / _group_size(process_group)).astype("float16"), flat.device)
    work = collectives.all_reduce(half, ReduceOp.SUM, group=process_group, async_op=True)
    return Future(work, lambda: Tensor._make(half.array.astype(flat.array.dtype), flat.device))
