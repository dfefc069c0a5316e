"""SimWorld: N ranks as threads of one process, with every message recorded — for teaching and grading.

Real jobs use MPI or NCCL (``init_process_group``). This world is for writing a collective *yourself* and
seeing exactly what it did: each rank runs ``fn(comm, *args)`` on its own thread; ``comm.send`` /
``comm.recv`` move NumPy arrays between them, and the world keeps a log of every message (who, to whom,
how many bytes, in which order). It also sees a deadlock the moment it happens: when every rank that has
not finished is blocked in ``recv`` and no message is on its way to any of them, all of them get a
``DeadlockError`` naming who waits for whom (and a plain timeout catches the rest).

    world = SimWorld(4)
    results = world.run(ring_all_reduce, [x0, x1, x2, x3])     # one argument list entry per rank
    world.messages   # [(src, dst, nbytes, seq)], world.bytes_sent() -> [per rank]

``send`` is buffered (it returns at once, like MPI's eager protocol for small messages), ``recv(src)``
blocks until a message from ``src`` arrives. ``iall_reduce(array)`` is a ready-made asynchronous sum over
all ranks (what DDP calls; each call is logged in ``events`` as ``(rank, "iall_reduce", index, size)``), so
code above the all-reduce can be tested apart from the one below it.
"""
import collections
import threading
import time

import numpy as np

from ..errors import DistTimeoutError, DistributedError

__all__ = ["SimWorld", "DeadlockError"]


class DeadlockError(DistTimeoutError):
    """Every unfinished rank waits in recv and nothing is in flight."""


class _Comm:
    def __init__(self, world, rank):
        self.world, self.rank, self.size = world, rank, world.size

    def send(self, array, dst):
        """Send a copy of ``array`` to rank ``dst`` (returns at once)."""
        self.world._send(self.rank, int(dst), np.array(array, copy=True))

    def recv(self, src):
        """The next array rank ``src`` sent to this rank (blocks until it arrives)."""
        return self.world._recv(self.rank, int(src))

    def iall_reduce(self, array):
        """Start summing ``array`` over all ranks; ``.wait()`` on the result returns the sum."""
        return self.world._iall_reduce(self.rank, np.array(array, copy=True))

    def log(self, *event):
        """Append ``(rank, *event)`` to the world's event log (timestamps for timelines, grading)."""
        self.world.events.append((self.rank,) + event)


class _Pending:
    def __init__(self, world, index):
        self.world, self.index = world, index

    def wait(self):
        return self.world._wait_reduce(self.index)


class SimWorld:
    def __init__(self, size, timeout=5.0):
        if size < 1:
            raise ValueError(f"SimWorld: size must be >= 1, got {size}")
        self.size, self.timeout = int(size), float(timeout)
        self.messages = []            # (src, dst, nbytes, seq)
        self.events = []              # (rank, ...) from comm.log
        self.reduces = []             # one entry per iall_reduce round: {"parts": {rank: array}, "nbytes"}
        self._queues = collections.defaultdict(collections.deque)   # (src, dst) -> arrays
        self._cond = threading.Condition()
        self._waiting = {}            # rank -> what it waits for: ("recv", src) or ("all_reduce", index)
        self._finished = set()
        self._deadlock = None
        self._reduce_count = [0] * self.size

    # --- the transport ---------------------------------------------------------------------------------
    def _send(self, src, dst, array):
        if not 0 <= dst < self.size or dst == src:
            raise DistributedError(f"rank {src}: send to rank {dst}, which is not another rank of this world of "
                                   f"{self.size}")
        with self._cond:
            self.messages.append((src, dst, int(array.nbytes), len(self.messages)))
            self._queues[(src, dst)].append(array)
            self._cond.notify_all()

    def _recv(self, rank, src):
        if not 0 <= src < self.size or src == rank:
            raise DistributedError(f"rank {rank}: recv from rank {src}, which is not another rank of this "
                                   f"world of {self.size}")
        queue = self._queues[(src, rank)]
        return self._block(rank, ("recv", src), lambda: bool(queue), queue.popleft)

    def _iall_reduce(self, rank, array):
        with self._cond:
            i = self._reduce_count[rank]
            self._reduce_count[rank] += 1
            while len(self.reduces) <= i:
                self.reduces.append({"parts": {}, "t_issue": {}})
            self.reduces[i]["parts"][rank] = array
            self.reduces[i]["t_issue"][rank] = time.perf_counter()
            self.events.append((rank, "iall_reduce", i, int(array.size)))
            self._cond.notify_all()
        return _Pending(self, i)

    def _wait_reduce(self, i):
        rank = self._rank_of_thread()
        entry = self.reduces[i]
        done = lambda: len(entry["parts"]) == self.size  # noqa: E731

        def total():
            shapes = {r: a.shape for r, a in entry["parts"].items()}
            if len(set(shapes.values())) > 1:
                raise DistributedError(f"all-reduce #{i}: the ranks passed different shapes {shapes}")
            return np.sum([entry["parts"][r] for r in range(self.size)], axis=0)
        return self._block(rank, ("all_reduce", i), done, total)

    def _block(self, rank, what, ready, take):
        deadline = time.monotonic() + self.timeout
        with self._cond:
            self._waiting[rank] = what
            try:
                while not ready():
                    if self._deadlock is not None:
                        raise DeadlockError(self._deadlock)
                    if self._all_stuck():
                        self._deadlock = self._describe("deadlock")
                        self._cond.notify_all()
                        raise DeadlockError(self._deadlock)
                    left = deadline - time.monotonic()
                    if left <= 0:
                        self._deadlock = self._describe(f"timeout after {self.timeout:g} s")
                        self._cond.notify_all()
                        raise DeadlockError(self._deadlock)
                    self._cond.wait(min(left, 0.05))
                return take()
            finally:
                del self._waiting[rank]

    def _all_stuck(self):
        alive = [r for r in range(self.size) if r not in self._finished]
        if any(r not in self._waiting for r in alive):
            return False
        for r in alive:
            kind, arg = self._waiting[r]
            if kind == "recv" and self._queues[(arg, r)]:
                return False
            if kind == "all_reduce" and len(self.reduces[arg]["parts"]) == self.size:
                return False
        return True

    def _describe(self, head):
        waits = ", ".join(f"rank {r} in recv from rank {a}" if k == "recv" else f"rank {r} in all-reduce #{a}"
                          for r, (k, a) in sorted(self._waiting.items()))
        done = f"; finished: {sorted(self._finished)}" if self._finished else ""
        return f"{head}: {waits or 'no rank'} waiting, and no message on its way{done}"

    def _rank_of_thread(self):
        return self._local.rank

    # --- running a program ------------------------------------------------------------------------------
    def run(self, fn, per_rank_args=None):
        """Run ``fn(comm, *args[rank])`` on every rank; returns the list of results (an exception raised on a
        rank is re-raised here, the first rank's first; a DeadlockError when the ranks got stuck)."""
        args = per_rank_args if per_rank_args is not None else [()] * self.size
        args = [a if isinstance(a, tuple) else (a,) for a in args]
        results, errors = [None] * self.size, [None] * self.size
        self._local = threading.local()

        def body(rank):
            self._local.rank = rank
            try:
                results[rank] = fn(_Comm(self, rank), *args[rank])
            except BaseException as e:  # reported below, in rank order
                errors[rank] = e
            finally:
                with self._cond:
                    self._finished.add(rank)
                    self._cond.notify_all()

        threads = [threading.Thread(target=body, args=(r,), daemon=True, name=f"rank{r}") for r in range(self.size)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(self.timeout + 1.0)
        if any(t.is_alive() for t in threads):
            raise DeadlockError(self._describe(f"timeout: ranks still running after {self.timeout:g} s"))
        for e in errors:  # a rank's own error first: the others' deadlock is only its consequence
            if e is not None and not isinstance(e, DeadlockError):
                raise e
        for e in errors:
            if e is not None:
                raise e
        return results

    def bytes_sent(self):
        """Bytes each rank sent, by rank."""
        out = [0] * self.size
        for src, _, nbytes, _ in self.messages:
            out[src] += nbytes
        return out
