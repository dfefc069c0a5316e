"""Run a generated NumPy kernel over its output in cache-sized blocks, on a few threads.

Eager NumPy evaluates ``y = x * 0.5 * (1 + tanh(...))`` one op at a time: each op reads and writes a whole
array, so a chain of k ops moves about 3k full arrays through memory and holds several full-size
temporaries. The fused kernel instead walks the output block by block (``BLOCK`` elements, a few hundred KB:
they stay in the CPU's L2 cache) and runs the whole chain on each block into small reusable buffers. Memory
traffic falls to reading the inputs and writing the output once; the temporaries are a few blocks.

Blocks follow the output's C order: the trailing axes whose sizes multiply to at most ``block`` are taken
whole, the axis before them is cut into chunks, and the leading axes are looped over. Inputs that broadcast
(size-1 or missing axes) are indexed accordingly, so a bias of shape (C,) is read in place, never expanded.
The block plan (every block's index into the output and into each input) depends only on the shapes, so it
is built once per shape and reused by every call (a compiled graph always sees the same shapes).

Threads: blocks are independent, and a NumPy ufunc releases the GIL while its loop runs, so the blocks are
split into ``THREADS`` contiguous runs, one per thread (PyTorch's inductor parallelises its fused loops the
same way). Each thread has its own block buffers: the peak of temporaries is the output plus
``threads x buffers x block`` elements (``temporaries_bytes``), and, while a broadcasting ufunc runs,
NumPy's own iterator buffers (``np.getbufsize()`` elements per operand, as in eager code). A ufunc call
costs a fraction of a microsecond of Python (holding the GIL) whatever its size, which is why blocks are a
few hundred KB and not the L1's 48 KB: smaller blocks make that fixed cost dominate, and the threads then
queue on the GIL instead of computing.
"""
import contextvars
import functools
import os
import queue
import threading

import numpy as np

BLOCK = 65536   # elements per block and thread: 256 KB of float32 per buffer (L2 is 512 KB-2 MB per core)
# threads a fused kernel may use: the CPUs this process may run on (os.cpu_count() where unknown); 1 runs
# every block on the calling thread. A module-level setting: blocked.THREADS = 1
THREADS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
MIN_BLOCKS_PER_THREAD = 4       # a thread costs tens of us to wake: give each at least ~0.2 ms of work


def plan(shape, block):
    """``(axis, chunk)``: blocks are ``out[i0, .., i_{axis-1}, lo:lo+chunk]``; axis -1: one block."""
    inner, axis = 1, len(shape)
    while axis > 0 and inner * shape[axis - 1] <= block:
        inner *= shape[axis - 1]
        axis -= 1
    if axis == 0:
        return -1, 0
    return axis - 1, max(1, block // inner)


def blocks(shape, block):
    """Index tuples (ints for looped axes, then a slice) covering ``shape`` in C order."""
    axis, chunk = plan(shape, block)
    if axis < 0:
        yield ()
        return
    for outer in np.ndindex(*shape[:axis]):
        for lo in range(0, shape[axis], chunk):
            yield outer + (slice(lo, min(lo + chunk, shape[axis])),)


def block_shape(shape, block):
    """The largest block's shape (buffers are allocated once at this size)."""
    axis, chunk = plan(shape, block)
    if axis < 0:
        return tuple(shape)
    return (min(chunk, shape[axis]),) + tuple(shape[axis + 1:])


def view_index(xshape, index, ndim):
    """The index of the part of an input of shape ``xshape`` (broadcasting to an ``ndim``-d output) that
    block ``index`` reads; None: the whole input.

    Both the output block and this view drop the looped (integer-indexed) leading axes, so what is left
    stays right-aligned and broadcasts as the whole arrays did."""
    if not index or not xshape:
        return None
    off, idx = ndim - len(xshape), []
    for d, size in enumerate(xshape):
        if d + off >= len(index):
            break
        e = index[d + off]
        idx.append(e if size != 1 else (0 if isinstance(e, int) else slice(None)))
    return tuple(idx) if idx else None


@functools.lru_cache(maxsize=256)
def block_plan(shape, input_shapes, block):
    """``[(out_index, [input index or None, ...], short), ...]`` for every block, and the buffers' shape;
    ``short``: the block is shorter than the buffers (the last chunk), which are then sliced."""
    bshape = block_shape(shape, block)
    entries = []
    for index in blocks(shape, block):
        part = index[-1] if index else None
        short = part is not None and bshape and part.stop - part.start != bshape[0]
        entries.append((index or None, [view_index(s, index, len(shape)) for s in input_shapes], bool(short)))
    return entries, bshape


def _run_blocks(body, inputs, out, bufs, entries):
    for index, idx, short in entries:
        o = out if index is None else out[index]
        t = [b[:o.shape[0]] for b in bufs] if short else bufs
        body(*[x if i is None else x[i] for x, i in zip(inputs, idx)], o, t)


class _Workers:
    """Threads that run ``(context, fn, part, done)`` tasks from one queue, started once and reused.

    A process that may not start more threads (an rlimit on processes, as in the autograder's sandbox)
    just has fewer workers (``capped``); the caller then runs the parts nobody took itself."""

    def __init__(self):
        self.pid, self.tasks, self.threads, self.capped = os.getpid(), queue.SimpleQueue(), [], False

    def grow(self, n):
        while len(self.threads) < n and not self.capped:
            t = threading.Thread(target=self._serve, name="minigrad-fused", daemon=True)
            try:
                t.start()
            except RuntimeError:   # "can't start new thread"
                self.capped = True
                break
            self.threads.append(t)
        return len(self.threads)

    def _serve(self):
        while True:
            ctx, fn, part, done = self.tasks.get()
            try:
                ctx.run(fn, part)
                done.put(None)
            except BaseException as e:   # handed to the caller, which re-raises it
                done.put(e)


_workers, _workers_lock = None, threading.Lock()
if hasattr(os, "register_at_fork"):   # a child forked while another thread held the lock gets a free one
    os.register_at_fork(after_in_child=lambda: globals().update(_workers_lock=threading.Lock()))


def _pool(n):
    """The process's workers, grown to ``n`` threads where possible (a forked child starts its own)."""
    global _workers
    with _workers_lock:
        if _workers is None or _workers.pid != os.getpid():
            _workers = _Workers()
        _workers.grow(n)
        return _workers


def threads_for(n_blocks, threads=None):
    """How many threads a kernel of ``n_blocks`` blocks runs on."""
    threads = THREADS if threads is None else threads
    return max(1, min(threads, n_blocks // MIN_BLOCKS_PER_THREAD))


def in_parallel(fn, parts):
    """``fn(part)`` for each part, the first on this thread and the others on the workers; returns when
    all are done and re-raises the first error.

    Each task runs in a copy of the caller's context and under the caller's ``np.errstate`` (a context
    variable in NumPy 2, per thread in NumPy 1: so it is passed on explicitly)."""
    pool = _pool(len(parts) - 1)
    given = parts[1:1 + len(pool.threads)]
    ctx, done = contextvars.copy_context(), queue.SimpleQueue()
    err = np.geterr()

    def task(part):
        with np.errstate(**err):
            fn(part)
    for p in given:
        pool.tasks.put((ctx.copy(), task, p, done))
    error = None
    try:
        for p in [parts[0]] + parts[1 + len(given):]:   # this thread's share and what no worker could take
            fn(p)
    except BaseException as e:
        error = e
    for _ in given:   # never leave while a worker still writes into the output
        e = done.get()
        error = error or e
    if error is not None:
        raise error


def split(entries, n):
    """``entries`` cut into ``n`` contiguous runs of nearly equal length."""
    step, extra = divmod(len(entries), n)
    cuts = [0]
    for k in range(n):
        cuts.append(cuts[-1] + step + (k < extra))
    return [entries[a:b] for a, b in zip(cuts, cuts[1:])]


def temporaries_bytes(shape, buffer_dtypes, block=BLOCK, threads=None):
    """The block buffers' bytes of one call: what a fused kernel holds beyond its inputs and output."""
    entries, bshape = block_plan(tuple(shape), (), block)
    size = int(np.prod(bshape))
    return threads_for(len(entries), threads) * sum(size * np.dtype(d).itemsize for d in buffer_dtypes)


def run_forward(body, inputs, out, buffer_dtypes, block=BLOCK, threads=None):
    """``body(*input_views, out_view, buffers)`` for each block of ``out``; buffers are reused."""
    shapes = tuple(x.shape if isinstance(x, np.ndarray) else () for x in inputs)
    entries, bshape = block_plan(out.shape, shapes, block)

    def run(part):   # each thread: its own buffers
        _run_blocks(body, inputs, out, [np.empty(bshape, dt) for dt in buffer_dtypes], part)
    _split_over_threads(run, entries, threads)
    return out


def run_backward(body, inputs, grad, wanted, dtypes, block=BLOCK, alloc=np.empty, threads=None):
    """Full-size gradients for the ``wanted`` inputs: ``body`` returns each block's gradients."""
    shapes = tuple(x.shape if isinstance(x, np.ndarray) else () for x in inputs)
    entries, _ = block_plan(grad.shape, shapes, block)
    grads = [alloc(grad.shape, dt) if w else None for w, dt in zip(wanted, dtypes)]

    def run(part):
        for index, idx, _ in part:
            parts = body(*[x if i is None else x[i] for x, i in zip(inputs, idx)],
                         grad if index is None else grad[index])
            for g, p in zip(grads, parts):
                if g is not None:
                    np.copyto(g if index is None else g[index], p)
    _split_over_threads(run, entries, threads)
    return grads


def _split_over_threads(run, entries, threads):
    n = threads_for(len(entries), threads)
    if n == 1:
        run(entries)
    else:
        in_parallel(run, split(entries, n))
