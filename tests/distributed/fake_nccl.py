"""A fake ``cupy`` with ``cupy.cuda.nccl`` for tests: NCCL's Python API (CuPy's signatures) on CPU.

It checks the 'nccl' backend's code path, not NCCL: device pointers (here the emulated CUDA device's
NumPy arrays, reached by address) with element counts and NCCL datatype codes, the dedicated stream and
its events. Streams run their work at once; every stream/event/NCCL call is appended to ``calls`` so a test
can check the order (the NCCL stream waits for an event of the compute stream, the collective runs on the
NCCL stream, ``wait()`` makes the compute stream wait for the NCCL stream's event). The bytes move through
mpi4py's COMM_WORLD when the world has several ranks (the job is started by mpiexec), or not at all in a
world of one. Modelled on tests/backend/cupy_on_cpu.py. ``install()`` puts it into ``sys.modules``.
Calls are recorded (tests/cupy_calls.py) for the check against the real CuPy (tests/cuda/test_cupy_api.py).
"""
import ctypes
import pathlib
import sys
import types

import numpy as np

sys.path.append(str(pathlib.Path(__file__).resolve().parents[1]))  # tests/: the call recorder
from cupy_calls import api  # noqa: E402

calls = []  # (what, details) in call order

# NCCL's enums, as cupy.cuda.nccl exposes them
NCCL_INT8, NCCL_UINT8, NCCL_INT32, NCCL_UINT32, NCCL_INT64, NCCL_UINT64 = range(6)
NCCL_FLOAT16, NCCL_FLOAT32, NCCL_FLOAT64 = 6, 7, 8
NCCL_SUM, NCCL_PROD, NCCL_MAX, NCCL_MIN = range(4)
_DTYPES = {NCCL_INT8: np.int8, NCCL_UINT8: np.uint8, NCCL_INT32: np.int32, NCCL_UINT32: np.uint32,
           NCCL_INT64: np.int64, NCCL_UINT64: np.uint64, NCCL_FLOAT16: np.float16,
           NCCL_FLOAT32: np.float32, NCCL_FLOAT64: np.float64}


def _view(ptr, count, datatype):
    """The ``count`` elements of ``datatype`` at device address ``ptr`` (host memory here)."""
    dtype = np.dtype(_DTYPES[datatype])
    raw = (ctypes.c_char * (count * dtype.itemsize)).from_address(ptr)
    return np.frombuffer(raw, dtype=dtype)


def _mpi():
    from mpi4py import MPI
    return MPI


@api("cupy.cuda.nccl.NcclCommunicator")
class NcclCommunicator:
    def __init__(self, ndev, commId, rank):
        if not isinstance(commId, bytes) or len(commId) != 128:   # CuPy 14: bytes (13: a tuple of ints)
            raise TypeError("fake NCCL: the unique id must be 128 bytes")
        self.ndev, self.rank, self.id = ndev, rank, tuple(commId)
        self.world = _mpi().COMM_WORLD if ndev > 1 else None
        if self.world is not None and self.world.Get_size() != ndev:
            raise RuntimeError(f"fake NCCL: {ndev} ranks requested, MPI world has {self.world.Get_size()}")
        self.aborted = False
        calls.append(("NcclCommunicator", (ndev, rank)))

    def _op(self, op):
        MPI = _mpi()
        return {NCCL_SUM: MPI.SUM, NCCL_PROD: MPI.PROD, NCCL_MAX: MPI.MAX, NCCL_MIN: MPI.MIN}[op]

    def _log(self, name, stream):
        if self.aborted:
            raise RuntimeError("fake NCCL: communicator used after abort")
        calls.append((name, stream))

    def allReduce(self, sendbuf, recvbuf, count, datatype, op, stream):
        self._log("allReduce", stream)
        send, recv = _view(sendbuf, count, datatype), _view(recvbuf, count, datatype)
        if self.world is None:
            recv[...] = send
        else:
            self.world.Allreduce(_mpi().IN_PLACE if sendbuf == recvbuf else send, recv, op=self._op(op))

    def broadcast(self, sendbuf, recvbuf, count, datatype, root, stream):
        self._log("broadcast", stream)
        buf = _view(recvbuf, count, datatype)
        if self.rank == root:
            buf[...] = _view(sendbuf, count, datatype)
        if self.world is not None:
            self.world.Bcast(buf, root=root)

    def allGather(self, sendbuf, recvbuf, count, datatype, stream):
        self._log("allGather", stream)
        send, recv = _view(sendbuf, count, datatype), _view(recvbuf, count * self.ndev, datatype)
        if self.world is None:
            recv[...] = send
        else:
            self.world.Allgather(send.copy(), recv)

    def reduceScatter(self, sendbuf, recvbuf, recvcount, datatype, op, stream):
        self._log("reduceScatter", stream)
        send, recv = _view(sendbuf, recvcount * self.ndev, datatype), _view(recvbuf, recvcount, datatype)
        if self.world is None:
            recv[...] = send
        else:
            self.world.Reduce_scatter_block(send.copy(), recv, op=self._op(op))

    def send(self, sendbuf, count, datatype, peer, stream):
        self._log("send", stream)
        self.world.Send(_view(sendbuf, count, datatype).copy(), dest=peer, tag=99)

    def recv(self, recvbuf, count, datatype, peer, stream):
        self._log("recv", stream)
        self.world.Recv(_view(recvbuf, count, datatype), source=peer, tag=99)

    def abort(self):
        calls.append(("abort", None))
        self.aborted = True

    def destroy(self):
        calls.append(("destroy", None))


@api("cupy.cuda.nccl.get_unique_id")
def get_unique_id():
    return bytes((i * 37) % 256 for i in range(128))  # 128 bytes, as CuPy >= 14 returns NCCL's id


# --- streams and events --------------------------------------------------------------------------------
@api("cupy.cuda.Stream")
class Stream:
    _count = 0

    def __init__(self, non_blocking=False, null=False):
        Stream._count += 1
        self.ptr = 0 if null else Stream._count
        self.non_blocking = non_blocking

    def __enter__(self):
        _current.append(self)
        return self

    def __exit__(self, *exc):
        _current.pop()

    def wait_event(self, event):
        calls.append(("wait_event", (self.ptr, event.stream)))


@api("cupy.cuda.Event")
class Event:
    def __init__(self, disable_timing=False):
        self.stream = None

    def record(self, stream=None):
        self.stream = (stream or get_current_stream()).ptr
        calls.append(("record", self.stream))

    @property
    def done(self):
        return self.stream is not None  # work runs at once on these streams


_current = [Stream(null=True)]


@api("cupy.cuda.get_current_stream")
def get_current_stream():
    return _current[-1]


@api("cupy.cuda.Device")
class Device:
    def __init__(self, index=0):
        self.id = index

    def use(self):
        calls.append(("use_device", self.id))


def install():
    """Make ``import cupy`` / ``from cupy.cuda import nccl`` return this fake."""
    cupy = types.ModuleType("cupy")
    cupy.__version__ = "14.2.0"   # the CuPy these fakes follow (make test-cuda checks them against it)
    cuda = types.ModuleType("cupy.cuda")
    nccl = sys.modules[__name__]
    cuda.nccl, cuda.Stream, cuda.Event, cuda.Device = nccl, Stream, Event, Device
    cuda.get_current_stream = get_current_stream
    cuda.runtime = types.SimpleNamespace(getDeviceCount=api("cupy.cuda.runtime.getDeviceCount")(lambda: 1))
    cupy.cuda = cuda
    for name in ("empty", "zeros", "stack", "ascontiguousarray", "divide"):
        setattr(cupy, name, api(f"cupy.{name}")(getattr(np, name)))
    sys.modules.update({"cupy": cupy, "cupy.cuda": cuda, "cupy.cuda.nccl": nccl})
    return cupy
