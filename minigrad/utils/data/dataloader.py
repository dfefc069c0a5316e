"""DataLoader: batches from a dataset, in the main process or in worker processes.

``num_workers=0`` fetches and collates in the main process. With ``num_workers > 0`` each epoch (each
``iter(loader)``) starts worker processes (``fork`` where the platform has it), hands out batches of
indices round-robin, keeps ``prefetch_factor * num_workers`` batches in flight, and returns batches in
sampler order whatever order they finish in. Workers send NumPy arrays; the main process turns them into
tensors. Given the same ``generator`` seed the batches are the same with or without workers.

Shutting workers down never hangs and always happens: when the epoch is exhausted, when the loop is left
early (``break``: the iterator is released), when a worker raises (its exception is re-raised here with the
worker's traceback in the message), when a worker dies, and at interpreter exit (``weakref.finalize``).
Workers are daemon processes, are joined with a timeout and terminated if they do not stop, and exit by
themselves if the main process dies.
"""
import functools
import itertools
import multiprocessing
import pickle
import queue
import signal
import sys
import time
import weakref

from ...autograd.extensions import Registry
from ...errors import ArgumentError
from ._worker import ExceptionWrapper, WorkerDone, WorkerError, make_fetcher, worker_loop
from .collate import default_collate, default_convert, from_transport
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler, _draw_seed

__all__ = ["DataLoader"]

_POLL_S = 0.5           # how often the main process checks that its workers are alive while it waits
_JOIN_TIMEOUT_S = 2.0   # how long shutdown waits for workers to finish their batch before terminating them

# Around every wait for a batch: fn(iterator, run) -> batch, where run() fetches it; named and ordered
# like the core's extension points (the same Registry: per thread unless process-wide). Empty unless a
# profile is recording (minigrad.profiler shows data-loading waits as their own events).
batch_wrappers = Registry("batch_wrappers")


class _InfiniteConstantSampler(Sampler):
    """The 'sampler' of an IterableDataset: None forever (the dataset decides when to stop)."""

    def __iter__(self):
        while True:
            yield None


def _default_context():
    if sys.platform != "darwin" and "fork" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context()


class DataLoader:
    """Iterate over ``dataset`` in batches.

    Args (as in PyTorch): ``batch_size=1`` (None turns automatic batching off), ``shuffle=False``,
    ``sampler``, ``batch_sampler``, ``num_workers=0``, ``collate_fn``, ``drop_last=False``, ``timeout=0``
    (seconds to wait for a batch from the workers; 0 waits forever but still notices dead workers),
    ``worker_init_fn(worker_id)``, ``multiprocessing_context`` (a start-method name or context),
    ``generator`` (an ``mg.Generator`` for the shuffle order and the workers' seeds),
    ``prefetch_factor`` (batches in flight per worker; default 2 when ``num_workers > 0``),
    ``persistent_workers=False`` (keep the workers alive between epochs).

    Each worker seeds Python's ``random``, NumPy's global RNG and minigrad's global RNG with
    ``base_seed + worker_id``, where ``base_seed`` is drawn from ``generator`` once per epoch;
    ``get_worker_info()`` tells a dataset which worker it is running in.
    """

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None,
                 persistent_workers=False):
        if not isinstance(num_workers, int) or isinstance(num_workers, bool) or num_workers < 0:
            raise ArgumentError(f"DataLoader: num_workers must be a non-negative integer, got {num_workers!r}")
        if timeout < 0:
            raise ArgumentError(f"DataLoader: timeout must be non-negative, got {timeout!r}")
        if num_workers == 0 and prefetch_factor is not None:
            raise ArgumentError("DataLoader: prefetch_factor can only be set with num_workers > 0 "
                                "(there is no prefetching in the main process)")
        if prefetch_factor is None and num_workers > 0:
            prefetch_factor = 2
        if prefetch_factor is not None and (not isinstance(prefetch_factor, int) or prefetch_factor < 1):
            raise ArgumentError(f"DataLoader: prefetch_factor must be a positive integer, got {prefetch_factor!r}")
        if persistent_workers and num_workers == 0:
            raise ArgumentError("DataLoader: persistent_workers needs num_workers > 0")

        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory  # accepted for compatibility; there is nothing to pin on cpu
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.generator = generator
        self.persistent_workers = persistent_workers
        if isinstance(multiprocessing_context, str):
            multiprocessing_context = multiprocessing.get_context(multiprocessing_context)
        self.multiprocessing_context = multiprocessing_context

        if isinstance(dataset, IterableDataset):
            self._dataset_kind = "iterable"
            if shuffle not in (None, False):
                raise ArgumentError("DataLoader: shuffle is not supported for an IterableDataset "
                                    "(shuffle inside the dataset)")
            if sampler is not None:
                raise ArgumentError("DataLoader: sampler is not supported for an IterableDataset")
            if batch_sampler is not None:
                raise ArgumentError("DataLoader: batch_sampler is not supported for an IterableDataset")
        else:
            self._dataset_kind = "map"
            shuffle = bool(shuffle)

        if sampler is not None and shuffle:
            raise ArgumentError("DataLoader: sampler and shuffle are mutually exclusive")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ArgumentError("DataLoader: batch_sampler is mutually exclusive with batch_size, shuffle, "
                                    "sampler and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None:
            if drop_last:
                raise ArgumentError("DataLoader: batch_size=None (no automatic batching) is incompatible "
                                    "with drop_last")
        elif not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ArgumentError(f"DataLoader: batch_size should be a positive integer or None, got {batch_size!r}")

        if sampler is None:
            if self._dataset_kind == "iterable":
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self._iterator = None

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __iter__(self):
        if self.num_workers == 0:
            return _SingleProcessIter(self)
        if self.persistent_workers:
            if self._iterator is None or self._iterator._state.shutdown:
                self._iterator = _MultiProcessIter(self)
            else:
                self._iterator._reset(self)
            return self._iterator
        return _MultiProcessIter(self)

    def __len__(self):
        if self._dataset_kind == "iterable":
            n = len(self.dataset)  # TypeError for a dataset without __len__, as in PyTorch
            if self.batch_size is not None:
                n = n // self.batch_size if self.drop_last else -(-n // self.batch_size)
            return n
        return len(self._index_sampler)

    def __repr__(self):
        return (f"DataLoader({type(self.dataset).__name__}, batch_size={self.batch_size}, "
                f"num_workers={self.num_workers}, drop_last={self.drop_last})")


class _BaseIter:
    def __init__(self, loader):
        # A weak reference: a persistent loader holds its iterator, and a cycle would keep the workers
        # alive until the garbage collector runs instead of until the loader is dropped.
        self._loader_ref = weakref.ref(loader)
        self._persistent = loader.persistent_workers
        self._dataset = loader.dataset
        self._kind = loader._dataset_kind
        self._auto_collation = loader._auto_collation
        self._drop_last = loader.drop_last
        self._collate_fn = loader.collate_fn
        self._reset_common(loader)

    def _reset_common(self, loader):
        # Drawn in every epoch, with and without workers, so that both consume the generator alike and
        # produce the same shuffle order for the same seed.
        self._base_seed = _draw_seed(loader.generator)
        self._sampler_iter = iter(loader._index_sampler)
        self._num_yielded = 0

    def __iter__(self):
        return self

    def __len__(self):
        loader = self._loader_ref()
        if loader is None:
            raise TypeError("len() of a DataLoader iterator whose DataLoader is gone")
        return len(loader)

    def __next__(self):
        data = self._next_data() if not batch_wrappers else self._wrapped_next()
        self._num_yielded += 1
        return data


    def _wrapped_next(self):
        run = self._next_data
        for wrap in reversed(batch_wrappers.current()):
            run = functools.partial(wrap, self, run)
        return run()


class _SingleProcessIter(_BaseIter):
    def __init__(self, loader):
        super().__init__(loader)
        self._fetcher = make_fetcher(self._kind, self._dataset, self._auto_collation, self._collate_fn,
                                     self._drop_last, in_worker=False)

    def _next_data(self):
        index = next(self._sampler_iter)
        return self._fetcher.fetch(index)  # StopIteration of an IterableDataset ends the loop


class _WorkerPool:
    """Everything the shutdown needs, kept apart from the iterator so ``weakref.finalize`` can hold it."""

    def __init__(self):
        self.workers = []
        self.index_queues = []
        self.result_queue = None
        self.done_event = None
        self.shutdown = False
        self.join_timeout = _JOIN_TIMEOUT_S  # 0 after a timeout or a dead worker: terminate at once


def _shutdown_workers(pool):
    """Stop the workers: ask nicely (done event + None), wait a bounded time, then terminate. Idempotent."""
    if pool.shutdown:
        return
    pool.shutdown = True
    try:
        if pool.done_event is not None:
            pool.done_event.set()
        for q in pool.index_queues:
            try:
                q.put(None)
            except Exception:
                pass
        deadline = time.monotonic() + pool.join_timeout
        for w in pool.workers:
            w.join(timeout=max(0.0, deadline - time.monotonic()))
        for w in pool.workers:
            if w.is_alive():
                w.terminate()
                w.join(timeout=1.0)
                if w.is_alive() and hasattr(w, "kill"):
                    w.kill()
                    w.join(timeout=1.0)
    finally:
        for q in pool.index_queues + ([pool.result_queue] if pool.result_queue is not None else []):
            try:
                q.cancel_join_thread()  # never block interpreter exit on a queue's feeder thread
                q.close()
            except Exception:
                pass


def _exit_description(code):
    if code is not None and code < 0:
        try:
            return f"was killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited unexpectedly with exit code {code}"


class _MultiProcessIter(_BaseIter):
    def __init__(self, loader):
        super().__init__(loader)
        n = loader.num_workers
        self._num_workers = n
        self._prefetch_factor = loader.prefetch_factor
        self._timeout = loader.timeout
        self._epoch = 0
        ctx = loader.multiprocessing_context or _default_context()
        pool = self._state = _WorkerPool()
        # Registered before any process starts, so a failure half-way still shuts down those started.
        self._finalizer = weakref.finalize(self, _shutdown_workers, pool)
        pool.result_queue = ctx.Queue()
        pool.done_event = ctx.Event()
        try:
            for worker_id in range(n):
                index_queue = ctx.Queue()
                w = ctx.Process(
                    target=worker_loop,
                    args=(self._kind, self._dataset, index_queue, pool.result_queue, pool.done_event,
                          self._auto_collation, self._collate_fn, self._drop_last,
                          self._base_seed + worker_id, loader.worker_init_fn, worker_id, n),
                    daemon=True, name=f"DataLoaderWorker-{worker_id}")
                w.start()
                pool.index_queues.append(index_queue)
                pool.workers.append(w)
        except BaseException:
            self._shutdown()
            raise
        self._start_epoch()

    def _reset(self, loader):
        """persistent_workers: a new epoch on the same workers (stale results are told apart by epoch)."""
        self._reset_common(loader)
        self._epoch += 1
        self._start_epoch()

    def _start_epoch(self):
        self._send_idx = 0
        self._rcvd_idx = 0
        self._task_info = {}           # send_idx -> [worker_id] or [worker_id, payload] once it arrived
        self._worker_active = [True] * self._num_workers
        self._worker_cycle = itertools.cycle(range(self._num_workers))
        self._sampler_exhausted = False
        for _ in range(self._prefetch_factor * self._num_workers):
            self._try_put_index()

    def _shutdown(self):
        self._finalizer()  # runs _shutdown_workers once; later calls do nothing

    def _try_put_index(self):
        if self._sampler_exhausted:
            return
        for _ in range(self._num_workers):
            worker_id = next(self._worker_cycle)
            if self._worker_active[worker_id]:
                break
        else:
            return  # every worker's stream has ended
        try:
            index = next(self._sampler_iter)
        except StopIteration:
            self._sampler_exhausted = True
            return
        self._state.index_queues[worker_id].put((self._epoch, self._send_idx, index))
        self._task_info[self._send_idx] = [worker_id]
        self._send_idx += 1

    def _get_payload(self):
        """The next result from any worker; raises WorkerError if a worker died or the timeout passed."""
        deadline = time.monotonic() + self._timeout if self._timeout > 0 else None
        while True:
            wait = _POLL_S if deadline is None else max(0.0, min(_POLL_S, deadline - time.monotonic()))
            try:
                return pickle.loads(self._state.result_queue.get(timeout=wait))
            except queue.Empty:
                pass
            for worker_id, w in enumerate(self._state.workers):
                if not w.is_alive():
                    self._state.join_timeout = 0.5
                    raise WorkerError(f"DataLoader worker {worker_id} (pid {w.pid}) "
                                      f"{_exit_description(w.exitcode)}")
            if deadline is not None and time.monotonic() >= deadline:
                self._state.join_timeout = 0.0  # the workers are stuck: do not wait for them
                raise WorkerError(f"DataLoader timed out after {self._timeout} seconds waiting for a batch "
                                  f"from its workers")

    def _next_data(self):
        if self._state.shutdown:
            raise StopIteration
        try:
            while True:
                # Skip tasks that will never be answered (their worker's stream ended).
                while self._rcvd_idx < self._send_idx:
                    info = self._task_info[self._rcvd_idx]
                    if len(info) == 2 or self._worker_active[info[0]]:
                        break
                    del self._task_info[self._rcvd_idx]
                    self._rcvd_idx += 1
                else:
                    if not self._persistent:
                        self._shutdown()
                    raise StopIteration
                info = self._task_info[self._rcvd_idx]
                if len(info) == 2:
                    del self._task_info[self._rcvd_idx]
                    self._rcvd_idx += 1
                    return self._process(info[1])
                epoch, idx, payload = self._get_payload()
                if epoch != self._epoch:
                    continue  # a result of an epoch that was left early (persistent workers)
                if isinstance(payload, WorkerDone):
                    # Its stream ended: its pending tasks are skipped above, the others go to live workers.
                    self._worker_active[payload.worker_id] = False
                    self._try_put_index()
                    continue
                if idx != self._rcvd_idx:
                    self._task_info[idx].append(payload)  # arrived early: keep it until its turn
                    continue
                del self._task_info[idx]
                self._rcvd_idx += 1
                return self._process(payload)
        except StopIteration:
            raise
        except BaseException:
            self._shutdown()  # KeyboardInterrupt, a dead worker, a worker's error: no worker outlives it
            raise

    def _process(self, payload):
        self._try_put_index()
        if isinstance(payload, ExceptionWrapper):
            self._shutdown()
            payload.reraise()
        return from_transport(payload)
