"""Backend 'nccl': collectives by NVIDIA's NCCL through ``cupy.cuda.nccl``, on CUDA tensors.

NCCL itself needs one thing from us: the *unique id* that names the communicator, made by rank 0 and handed
to the others through the store. Then every collective runs on a dedicated CUDA stream, so communication
overlaps the computation on the default stream:

    compute stream:  ... grad ready ─ record event A ─────── more backward ─────── wait event B ─ step
    NCCL stream:                      wait A ─ allReduce ─ record B

``Work.wait`` polls event B (never ``cudaStreamSynchronize``, which would hang on a dead peer), then
makes the current stream wait for it; past the timeout the communicator is aborted (``ncclCommAbort``).
The emulated CUDA device (NumPy arrays) runs this same code with a fake ``cupy.cuda.nccl`` in the tests.
"""
import numpy as np

from ..errors import ArgumentError, DistributedError
from .reduce_op import ReduceOp
from .work import Work

_NCCL_TYPES = {"int8": "NCCL_INT8", "uint8": "NCCL_UINT8", "int32": "NCCL_INT32", "uint32": "NCCL_UINT32",
               "int64": "NCCL_INT64", "uint64": "NCCL_UINT64", "float16": "NCCL_FLOAT16",
               "float32": "NCCL_FLOAT32", "float64": "NCCL_FLOAT64"}
_NCCL_OPS = {ReduceOp.SUM: "NCCL_SUM", ReduceOp.PRODUCT: "NCCL_PROD", ReduceOp.MIN: "NCCL_MIN",
             ReduceOp.MAX: "NCCL_MAX", ReduceOp.AVG: "NCCL_SUM"}  # AVG: a sum, divided on the NCCL stream


def _pointer(array):
    """Device address of ``array``: CuPy's ``data.ptr`` (the emulated device's NumPy arrays: their address)."""
    data = array.data
    return data.ptr if hasattr(data, "ptr") else array.ctypes.data


class NCCLBackend:
    device_type = "cuda"  # collectives check their tensors against this

    def __init__(self, group, prefix):
        try:
            import cupy
            from cupy.cuda import nccl
        except ImportError as e:
            raise DistributedError("backend 'nccl' needs CuPy with NCCL: pip install 'minigrad[gpu]' "
                                   "(cupy-cuda12x and nvidia-nccl-cu12)") from e
        import os
        self.cupy, self.nccl, self.group = cupy, nccl, group
        local = int(os.environ.get("LOCAL_RANK", group.global_rank))
        self.device_index = local % max(1, cupy.cuda.runtime.getDeviceCount())
        cupy.cuda.Device(self.device_index).use()
        key = f"{prefix}nccl_unique_id"
        if group.rank == 0:
            uid = nccl.get_unique_id()   # 128 bytes (CuPy >= 14), or a tuple of 128 signed chars (CuPy 13)
            group.store.set(key, uid if isinstance(uid, bytes) else bytes(b % 256 for b in uid))
        raw = group.store.get(key, group.timeout)
        if int(cupy.__version__.split(".")[0]) < 14:   # CuPy 13's NcclCommunicator takes the tuple
            raw = tuple(b - 256 if b > 127 else b for b in raw)
        self.comm = nccl.NcclCommunicator(group.size, raw, group.rank)
        self.stream = cupy.cuda.Stream(non_blocking=True)

    def new_subgroup(self, group):
        """A communicator of its own for subgroup ``group``: a unique id made by its first rank."""
        return NCCLBackend(group, f"{group.world.prefix}{group.name}/")

    # --- helpers -------------------------------------------------------------------------------------
    def _check(self, name, array):
        if array.dtype.name not in _NCCL_TYPES:
            raise ArgumentError(f"{name}: NCCL cannot move {array.dtype} tensors")
        if not array.flags.c_contiguous:
            raise ArgumentError(f"{name}: backend 'nccl' needs a contiguous tensor (call .contiguous())")
        return getattr(self.nccl, _NCCL_TYPES[array.dtype.name])

    def _launch(self, name, enqueue, after=None):
        """Order ``enqueue(stream_ptr)`` after the work already queued on the current stream, then return a
        Work that completes when the NCCL stream gets past it."""
        cuda = self.cupy.cuda
        ready = cuda.Event(disable_timing=True)
        ready.record(cuda.get_current_stream())
        self.stream.wait_event(ready)
        with self.stream:
            enqueue(self.stream.ptr)
            if after is not None:
                after()
        done = cuda.Event(disable_timing=True)
        done.record(self.stream)

        def finish():
            cuda.get_current_stream().wait_event(done)
        return Work(self.group, name, lambda: done.done, finish, abort=self.abort)

    # --- collectives ---------------------------------------------------------------------------------
    def all_reduce(self, array, op):
        dtype = self._check("all_reduce", array)
        ptr, op_code = _pointer(array), getattr(self.nccl, _NCCL_OPS[op])
        avg = (lambda: self.cupy.divide(array, self.group.size, out=array)) if op is ReduceOp.AVG else None
        return self._launch("all_reduce", lambda s: self.comm.allReduce(ptr, ptr, array.size, dtype, op_code, s), avg)

    def broadcast(self, array, src):
        dtype = self._check("broadcast", array)
        ptr = _pointer(array)
        return self._launch("broadcast", lambda s: self.comm.broadcast(ptr, ptr, array.size, dtype, src, s))

    def all_gather(self, outputs, array):
        dtype = self._check("all_gather", array)
        recv = self.cupy.empty((self.group.size,) + array.shape, array.dtype)

        def enqueue(s):
            self.comm.allGather(_pointer(array), _pointer(recv), array.size, dtype, s)
            for out, part in zip(outputs, recv):
                out[...] = part  # still on the NCCL stream: ordered after the gather
        return self._launch("all_gather", enqueue)

    def reduce_scatter(self, output, inputs, op):
        dtype = self._check("reduce_scatter", output)
        send = self.cupy.ascontiguousarray(self.cupy.stack(inputs))
        op_code = getattr(self.nccl, _NCCL_OPS[op])
        avg = (lambda: self.cupy.divide(output, self.group.size, out=output)) if op is ReduceOp.AVG else None
        return self._launch("reduce_scatter", lambda s: self.comm.reduceScatter(
            _pointer(send), _pointer(output), output.size, dtype, op_code, s), avg)

    def all_gather_flat(self, output, array):
        dtype = self._check("all_gather_into_tensor", array)
        self._check("all_gather_into_tensor", output)
        return self._launch("all_gather", lambda s: self.comm.allGather(
            _pointer(array), _pointer(output), array.size, dtype, s))

    def reduce_scatter_flat(self, output, array, op):
        dtype = self._check("reduce_scatter_tensor", array)
        self._check("reduce_scatter_tensor", output)
        op_code = getattr(self.nccl, _NCCL_OPS[op])
        avg = (lambda: self.cupy.divide(output, self.group.size, out=output)) if op is ReduceOp.AVG else None
        return self._launch("reduce_scatter", lambda s: self.comm.reduceScatter(
            _pointer(array), _pointer(output), output.size, dtype, op_code, s), avg)

    def send(self, array, dst, tag):
        dtype = self._check("send", array)
        return self._launch("send", lambda s: self.comm.send(_pointer(array), array.size, dtype, dst, s))

    def recv(self, array, src, tag):
        if src is None:
            raise ArgumentError("recv: backend 'nccl' needs src (NCCL has no receive-from-any)")
        dtype = self._check("recv", array)
        work = self._launch("recv", lambda s: self.comm.recv(_pointer(array), array.size, dtype, src, s))
        work.source = lambda: src
        return work

    def barrier(self):
        """A one-element all-reduce: NCCL has no barrier of its own (PyTorch does the same)."""
        one = self.cupy.zeros(1, np.float32)
        dtype, op = self.nccl.NCCL_FLOAT32, self.nccl.NCCL_SUM
        return self._launch("barrier", lambda s: self.comm.allReduce(_pointer(one), _pointer(one), 1, dtype, op, s))

    def abort(self):
        self.group.broken = True
        self.comm.abort()

    def close(self):
        if not self.group.broken:
            self.comm.destroy()
