"""What runs inside a DataLoader worker process, and what the main process needs to talk to it.

Protocol (one index queue per worker, one shared result queue):

* main -> worker: ``(epoch, send_idx, index)`` tasks, or ``None`` to exit;
* worker -> main: ``pickle.dumps((epoch, send_idx, payload))`` where payload is the batch in transport form
  (NumPy arrays wrapped in ``TensorData``), an ``ExceptionWrapper`` (the worker's error with its
  traceback as text), or ``WorkerDone`` (an IterableDataset's stream ended in this worker).

The worker pickles each result itself, so an unpicklable batch becomes an error in the main process rather
than a batch silently lost in the queue's feeder thread. It ignores SIGINT (the main process handles Ctrl-C
and shuts it down), exits when it receives ``None``, and exits on its own when its parent dies.
"""
import multiprocessing
import pickle
import queue
import random
import signal
import sys
import traceback

import numpy as np

from ...errors import WorkerError
from ...random import manual_seed
from .collate import (collate_arrays, convert_arrays, default_collate, default_convert, from_transport,
                      to_transport)

__all__ = ["WorkerInfo", "get_worker_info", "WorkerError", "ExceptionWrapper"]

_WORKER_POLL_S = 1.0  # how often an idle worker checks that its parent is still alive

_worker_info = None


class WorkerInfo:
    """What ``get_worker_info()`` returns inside a worker: ``id``, ``num_workers``, ``seed``, ``dataset``
    (this worker's copy)."""

    __slots__ = ("id", "num_workers", "seed", "dataset")

    def __init__(self, id, num_workers, seed, dataset):
        self.id = id
        self.num_workers = num_workers
        self.seed = seed
        self.dataset = dataset

    def __repr__(self):
        return f"WorkerInfo(id={self.id}, num_workers={self.num_workers}, seed={self.seed})"


def get_worker_info():
    """In a DataLoader worker: its ``WorkerInfo``; in the main process: None."""
    return _worker_info


class _KeyErrorMessage(str):
    """KeyError shows repr() of its argument; this keeps a multi-line traceback readable."""

    def __repr__(self):
        return self


class ExceptionWrapper:
    """An exception caught in a worker, carried to the main process as its type plus traceback text."""

    def __init__(self, exc_info=None, where="in background"):
        exc_type, exc, tb = exc_info if exc_info is not None else sys.exc_info()
        self.exc_msg = "".join(traceback.format_exception(exc_type, exc, tb))
        self.where = where
        try:
            pickle.loads(pickle.dumps(exc_type))
        except Exception:  # e.g. an exception class defined inside a function
            self.exc_msg = f"[{exc_type.__qualname__} cannot be rebuilt in the main process]\n" + self.exc_msg
            exc_type = WorkerError
        self.exc_type = exc_type

    def reraise(self):
        msg = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.exc_msg}"
        if self.exc_type is KeyError:
            msg = _KeyErrorMessage(msg)
        try:
            exc = self.exc_type(msg)
        except Exception:
            exc = WorkerError(msg)
        exc.worker_traceback = self.exc_msg
        raise exc


class WorkerDone:
    """Sent by a worker whose IterableDataset stream is exhausted."""

    __slots__ = ("worker_id",)

    def __init__(self, worker_id):
        self.worker_id = worker_id

    def __reduce__(self):
        return (WorkerDone, (self.worker_id,))


# --- fetchers: index (or list of indices) -> batch ------------------------------------------------------
class _MapFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, drop_last, in_worker):
        self.dataset = dataset
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.drop_last = drop_last
        self.in_worker = in_worker

    def _default(self, batch_in_transport_form):
        return to_transport(batch_in_transport_form) if self.in_worker else from_transport(batch_in_transport_form)

    def _custom(self, batch):
        return to_transport(batch) if self.in_worker else batch

    def _collate(self, data):
        if self.collate_fn is default_collate:
            return self._default(collate_arrays(data))
        return self._custom(self.collate_fn(data))

    def _convert(self, data):
        if self.collate_fn is default_convert:
            return self._default(convert_arrays(data))
        return self._custom(self.collate_fn(data))

    def fetch(self, index):
        if not self.auto_collation:
            return self._convert(self.dataset[index])
        if self.collate_fn is default_collate:
            fast = getattr(self.dataset, "_fetch_batch", None)
            if fast is not None:
                batch = fast(index)
                if batch is not NotImplemented:
                    return self._default(batch)
        getitems = getattr(self.dataset, "__getitems__", None)
        data = getitems(index) if getitems is not None else [self.dataset[i] for i in index]
        return self._collate(data)


class _IterableFetcher(_MapFetcher):
    def __init__(self, dataset, auto_collation, collate_fn, drop_last, in_worker):
        super().__init__(dataset, auto_collation, collate_fn, drop_last, in_worker)
        self.iterator = iter(dataset)

    def fetch(self, index):
        """``index`` is a list of ``batch_size`` placeholders (auto-collation) or None."""
        if not self.auto_collation:
            return self._convert(next(self.iterator))
        data = []
        for _ in range(len(index)):
            try:
                data.append(next(self.iterator))
            except StopIteration:
                break
        if not data or (self.drop_last and len(data) < len(index)):
            raise StopIteration
        return self._collate(data)


def make_fetcher(kind, dataset, auto_collation, collate_fn, drop_last, in_worker):
    cls = _IterableFetcher if kind == "iterable" else _MapFetcher
    return cls(dataset, auto_collation, collate_fn, drop_last, in_worker)


# --- the worker process ---------------------------------------------------------------------------------
def seed_worker(seed):
    """Seed Python's, NumPy's global and minigrad's RNGs (distinct per worker: base seed + worker id)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    manual_seed(seed)


def _dumps(epoch, idx, payload, where):
    try:
        return pickle.dumps((epoch, idx, payload), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        err = ExceptionWrapper(where=f"{where} while sending a batch to the main process (a batch must be "
                                     f"picklable: tensors, NumPy arrays, numbers, strings and containers)")
        return pickle.dumps((epoch, idx, err), protocol=pickle.HIGHEST_PROTOCOL)


def worker_loop(kind, dataset, index_queue, data_queue, done_event, auto_collation, collate_fn, drop_last,
                seed, init_fn, worker_id, num_workers):
    global _worker_info
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except (ValueError, OSError, AttributeError):
        pass
    where = f"in DataLoader worker process {worker_id}"
    try:
        seed_worker(seed)
        _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)
        init_error, fetcher = None, None
        try:
            if init_fn is not None:
                init_fn(worker_id)
            fetcher = make_fetcher(kind, dataset, auto_collation, collate_fn, drop_last, in_worker=True)
        except Exception:
            init_error = ExceptionWrapper(where=where)
        parent = multiprocessing.parent_process()
        epoch, exhausted = None, False
        while True:
            try:
                task = index_queue.get(timeout=_WORKER_POLL_S)
            except queue.Empty:
                if parent is not None and not parent.is_alive():
                    break  # orphaned: nobody will ever read our results
                continue
            if task is None:
                break
            if done_event.is_set():
                continue
            task_epoch, idx, index = task
            if task_epoch != epoch:
                if epoch is not None and kind == "iterable" and init_error is None:
                    try:  # persistent workers: a new epoch restarts the stream
                        fetcher = make_fetcher(kind, dataset, auto_collation, collate_fn, drop_last, True)
                    except Exception:
                        init_error = ExceptionWrapper(where=where)
                epoch, exhausted = task_epoch, False
            if exhausted:
                continue
            if init_error is not None:
                payload, init_error = init_error, None
            else:
                try:
                    payload = fetcher.fetch(index)
                except StopIteration:
                    if kind != "iterable":
                        payload = ExceptionWrapper(where=where)
                    else:
                        payload, exhausted = WorkerDone(worker_id), True
                except Exception:
                    payload = ExceptionWrapper(where=where)
            data_queue.put(_dumps(task_epoch, idx, payload, where))
            del payload, task, index
    except KeyboardInterrupt:
        pass
    finally:
        # Never block this process's exit on results that the main process will not read.
        data_queue.cancel_join_thread()
        data_queue.close()
