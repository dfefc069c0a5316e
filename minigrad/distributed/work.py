"""Work: a collective in flight, and the one loop that waits for it with a deadline.

A backend returns a Work whose ``_test()`` asks its library "done yet?" (MPI's ``Request.Testall``, a CUDA
event's ``done``) without blocking. ``wait()`` polls it until the group's timeout: the library's own
blocking waits (``MPI_Wait``, ``ncclCommDestroy``) would hang forever on a dead peer, and the whole point
is that a missing rank becomes an error that names it.
"""
import time

__all__ = ["Work"]


class Work:
    """Returned by a collective called with ``async_op=True``; ``wait()`` completes it (PyTorch's name).

    After ``wait()`` the output tensors hold the result. ``is_completed()`` never blocks.
    """

    def __init__(self, group, name, test, finish=None, abort=None):
        self._group, self.name = group, name
        self._test, self._finish, self._abort = test, finish, abort
        self._done = False
        self.seq = group._next_seq(name)
        self.issued_at = time.perf_counter()
        self.completed_at = None

    def is_completed(self):
        if not self._done and self._test():
            self._complete()
        return self._done

    def wait(self, timeout=None):
        """Block until the collective is done; a DistTimeoutError naming the missing ranks after the
        group's timeout (or ``timeout`` seconds). Returns True, as PyTorch's."""
        if self._done:
            return True
        limit = self._group.timeout if timeout is None else float(timeout)
        deadline = time.monotonic() + limit
        delay = 0.0
        while not self._test():
            if time.monotonic() > deadline:
                if self._abort is not None:
                    self._abort()
                raise self._group.timeout_error(self, limit)
            time.sleep(delay)  # yields the core to the peer process on a small machine
            delay = min(delay * 2 or 2e-5, 1e-3)
        self._complete()
        return True

    def _complete(self):
        self._done = True
        self.completed_at = time.perf_counter()
        if self._finish is not None:
            self._finish()
            self._finish = None

    def __repr__(self):
        return f"<Work #{self.seq} {self.name} {'done' if self._done else 'pending'}>"


class CompletedWork(Work):
    """A collective that finished at once (a world of one, or a zero-size tensor)."""

    def __init__(self, group, name, finish=None):
        super().__init__(group, name, lambda: True, finish)
        self._complete()
