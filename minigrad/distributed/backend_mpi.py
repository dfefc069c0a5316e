"""Backend 'mpi': collectives by mpi4py on NumPy buffers (the CPU path), every one nonblocking.

Each collective is MPI's nonblocking version (``Iallreduce``, ``Ibcast``, ``Iallgather``,
``Ireduce_scatter_block``, ``Isend``/``Irecv``, ``Ibarrier``) on the tensor's own memory when it is a
C-contiguous NumPy array (the emulated CUDA device's arrays are), else on a host copy written back when the
Work completes. ``Work.wait`` polls ``Request.Test``; MPI moves data only while it is called, so DDP also
pokes pending Works from its hooks (``progress``) to keep buckets moving during backward.

The MPI library is the ``mpich`` wheel (``pip install minigrad[dist]`` brings ``mpiexec``).
"""
import atexit
import os
import sys

import numpy as np

from ..errors import DistributedError
from .reduce_op import ReduceOp
from .work import CompletedWork, Work

_MPI = None


def mpi():
    """``mpi4py.MPI``, imported (and MPI initialised) on first use, with a clear error if missing."""
    global _MPI
    if _MPI is None:
        try:
            from mpi4py import MPI
        except ImportError as e:
            raise DistributedError("backend 'mpi' needs mpi4py and an MPI library: "
                                   "pip install 'minigrad[dist]' (mpi4py + the mpich wheel)") from e
        _MPI = MPI
    return _MPI


class MPIBackend:
    def _exit_if_broken(self):
        """After a timeout, MPI_Finalize would wait forever for the dead peer: leave without it."""
        if self.group.broken:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(1)

    def __init__(self, group, comm=None):
        MPI = mpi()
        self.group = group
        if comm is None:  # the world; a subgroup brings its communicator (new_subgroup)
            atexit.register(self._exit_if_broken)  # registered after mpi4py's finalizer, so it runs before it
            comm = MPI.COMM_WORLD.Dup()
        self.comm = comm
        self.comm.Set_errhandler(MPI.ERRORS_RETURN)  # failures raise in Python instead of aborting
        if self.comm.Get_size() != group.size or self.comm.Get_rank() != group.rank:
            raise DistributedError(
                f"init_process_group(backend='mpi'): MPI says rank {self.comm.Get_rank()} of "
                f"{self.comm.Get_size()}, the environment says rank {group.rank} of {group.size}; start "
                f"the job with mpiexec -n {group.size} or python -m minigrad.distributed.run")
        self.ops = {ReduceOp.SUM: MPI.SUM, ReduceOp.AVG: MPI.SUM, ReduceOp.PRODUCT: MPI.PROD,
                    ReduceOp.MIN: MPI.MIN, ReduceOp.MAX: MPI.MAX}

    def new_subgroup(self, group):
        """The backend of subgroup ``group`` (its global ``ranks``): MPI_Comm_create_group, which only the
        members call (they have all met at the store first, so none waits here for a dead one)."""
        comm = self.comm.Create_group(self.comm.Get_group().Incl(group.ranks))
        return MPIBackend(group, comm)

    # --- helpers -------------------------------------------------------------------------------------
    def _work(self, name, requests, finish=None):
        MPI = mpi()
        return Work(self.group, name, lambda: MPI.Request.Testall(requests), finish)

    @staticmethod
    def _buffer(array):
        """(host buffer, write-back) for ``array``: itself when MPI can use its memory, else a copy."""
        if isinstance(array, np.ndarray) and array.flags.c_contiguous and array.flags.writeable:
            return array, None
        host = np.ascontiguousarray(array.get() if hasattr(array, "get") else array)

        return host, lambda: _store(array, host)

    @staticmethod
    def _then(*steps):
        steps = [s for s in steps if s is not None]
        return (lambda: [s() for s in steps]) if steps else None

    # --- collectives ---------------------------------------------------------------------------------
    def all_reduce(self, array, op):
        buf, back = self._buffer(array)
        MPI = mpi()
        avg = None
        if op is ReduceOp.AVG:
            def avg():
                np.divide(buf, self.group.size, out=buf)
        req = self.comm.Iallreduce(MPI.IN_PLACE, buf, op=self.ops[op])
        return self._work("all_reduce", [req], self._then(avg, back))

    def broadcast(self, array, src):
        buf, back = self._buffer(array)
        req = self.comm.Ibcast(buf, root=src)
        return self._work("broadcast", [req], back if self.group.rank != src else None)

    def all_gather(self, outputs, array):
        buf, _ = self._buffer(array)
        recv = np.empty((self.group.size,) + buf.shape, buf.dtype)
        req = self.comm.Iallgather(buf, recv)

        def scatter_out():
            for out, part in zip(outputs, recv):
                _store(out, part)
        return self._work("all_gather", [req], scatter_out)

    def reduce_scatter(self, output, inputs, op):
        send = np.ascontiguousarray(np.stack([np.asarray(a.get() if hasattr(a, "get") else a) for a in inputs]))
        buf, back = self._buffer(output)
        req = self.comm.Ireduce_scatter_block(send, buf, op=self.ops[op])
        avg = (lambda: np.divide(buf, self.group.size, out=buf)) if op is ReduceOp.AVG else None
        return self._work("reduce_scatter", [req], self._then(avg, back))

    def all_gather_flat(self, output, array):
        buf, _ = self._buffer(array)
        out, back = self._buffer(output)
        return self._work("all_gather", [self.comm.Iallgather(buf, out)], back)

    def reduce_scatter_flat(self, output, array, op):
        send, _ = self._buffer(array)
        buf, back = self._buffer(output)
        req = self.comm.Ireduce_scatter_block(send, buf, op=self.ops[op])
        avg = (lambda: np.divide(buf, self.group.size, out=buf)) if op is ReduceOp.AVG else None
        return self._work("reduce_scatter", [req], self._then(avg, back))

    def send(self, array, dst, tag):
        buf, _ = self._buffer(array)
        return self._work("send", [self.comm.Isend(buf, dest=dst, tag=tag)])

    def recv(self, array, src, tag):
        MPI = mpi()
        buf, back = self._buffer(array)
        status = MPI.Status()
        source = MPI.ANY_SOURCE if src is None else src
        req = self.comm.Irecv(buf, source=source, tag=MPI.ANY_TAG if tag is None else tag)
        work = Work(self.group, "recv", lambda: req.Test(status), back)
        work.source = lambda: status.Get_source()
        return work

    def barrier(self):
        if self.group.size == 1:
            return CompletedWork(self.group, "barrier")
        return self._work("barrier", [self.comm.Ibarrier()])

    def close(self):
        if self.group.broken:
            return  # freeing a communicator with a dead peer can block
        try:
            self.comm.Free()
        except Exception:  # already finalised at interpreter exit
            pass


def _store(array, host):
    """Write host memory into ``array`` (NumPy, or a CuPy array: ``set`` copies host to device)."""
    if isinstance(array, np.ndarray):
        array[...] = host
    else:
        array.set(np.ascontiguousarray(host, dtype=array.dtype))
