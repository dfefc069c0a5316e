"""a2_memory: the caching memory pool, graded against memory budgets.

The student writes, in ``solutions/a2_memory.ipynb`` (cells by id):

  part1  a2-base (given), a2-sizes, a2-bump   round_size / pool_of / segment_size, and BumpAllocator
  part2  a2-bestfit                            should_split and BestFitAllocator (best fit + splitting)
  part3  a2-coalesce                           CoalescingAllocator (coalescing on free, empty_cache)
  part4  a2-oom                                StudentAllocator (OOM: drop the cache, retry, raise);
                                               it replaces minigrad's pool to train a model

How it is graded. Every workload is a list of operations (``ops``, int64 rows ``[op, id, nbytes]``: malloc
``id`` of ``nbytes``, free ``id``, or empty_cache) built here in the parent: crafted scenarios, random
sequences, and the allocation trace of a real minigrad training run, recorded with
``minigrad.memory.record_memory_history`` on minigrad's own pool (deterministic: the garbage collector is
off while recording). The sandboxed child runs the ops through the student's allocator on a
``TraceSource``: a device the grader owns, which logs every segment the allocator obtains or releases.
The child returns only that log plus the address and size of every block ``malloc`` returned; nothing
the student's allocator says about itself (its statistics) is read. The parent replays the log
(``verdicts.replay``: no overlapping live blocks, 512-byte alignment, blocks inside reserved segments,
sizes >= requests, capacity) and measures peak reserved bytes, unused reserved
bytes and fragmentation (minigrad.memory's fragmentation_of, at peak reservation) itself. Expected layouts
and budgets come from running minigrad's own allocator, in the parent, on the same ops.

Unused reserved memory (``_Log.unused_share``) is the time-averaged share of reserved memory that holds
no requested byte: ``1 - sum(live requested bytes) / sum(reserved bytes)`` over the ops. Fragmentation is
only ever minigrad.memory's (1 - largest free block / all free bytes). Budgets: 1.25x the reference's
peak reserved bytes and 1.25x its average unused reserved bytes.

The spec is imported in the child too: numpy and the autograder package at the top, minigrad only
inside functions.

Modules, in the order a case flows through them: ``trace_device`` (the logging device and the driver),
``workloads`` (the operations), ``observe`` (the child), ``reference`` (minigrad's allocator on the same
operations), ``log_reader`` (the log in the student's terms), ``verdicts``, and ``assignment`` (the spec).
This package's namespace is what the autograder and the child look up by name.
"""
from .assignment import ASSIGNMENT, CARD, CARD_MLP, TRAIN_CNN, TRAIN_MLP, _trace
from .log_reader import _Log
from .observe import _train, observe_minigrad, observe_ops, observe_sizes
from .trace_device import ALIGN, EMPTY, FREE, MALLOC, KiB, MiB, TraceSource, _drive
from .verdicts import BUDGET, verdict_best_fit
from .workloads import _training_ops, inputs_minigrad, inputs_ops, inputs_sizes

__all__ = ["ALIGN", "ASSIGNMENT", "BUDGET", "CARD", "CARD_MLP", "EMPTY", "FREE", "KiB", "MALLOC", "MiB",
           "TRAIN_CNN", "TRAIN_MLP", "TraceSource", "_Log", "_drive", "_trace", "_train", "_training_ops",
           "inputs_minigrad", "inputs_ops", "inputs_sizes", "observe_minigrad", "observe_ops", "observe_sizes",
           "verdict_best_fit"]
