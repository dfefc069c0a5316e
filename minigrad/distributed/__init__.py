"""``minigrad.distributed``: data, sharded, tensor and pipeline parallelism on real collective libraries,
with PyTorch's names.

    import minigrad.distributed as dist
    dist.init_process_group("mpi")            # or "nccl" on GPUs; started by mpiexec or
    model = dist.DistributedDataParallel(net) # python -m minigrad.distributed.run --nproc-per-node 2 ...
    dist.all_reduce(t, op=dist.ReduceOp.SUM)

Backends: 'mpi' (mpi4py + the mpich wheel; CPU tensors) and 'nccl' (cupy.cuda.nccl; CUDA tensors).
Subpackages: ``fsdp`` (FullyShardedDataParallel), ``tensor_parallel`` (parallelize_module),
``pipelining`` (PipelineStage, ScheduleGPipe, Schedule1F1B), ``algorithms`` (DDP communication hooks:
fp16, PowerSGD), ``param_server`` (the parameter-server loop the lecture compares with the ring).
``SimWorld`` runs N ranks as threads with every message recorded (for writing collectives in class).
Nothing here is imported by minigrad's core; mpi4py and CuPy are imported only when a group starts.
"""
from ..errors import DistributedError, DistTimeoutError
from .collectives import (all_gather, all_gather_into_tensor, all_reduce, barrier, broadcast, irecv, isend, recv,
                          reduce_scatter, reduce_scatter_tensor, send)
from .ddp import DistributedDataParallel
from .device_mesh import DeviceMesh, init_device_mesh
from .groups import GroupMember, get_global_rank, get_group_rank, get_process_group_ranks, new_group
from .process_group import (ReduceOp, comm_log, comm_stats, destroy_process_group, get_backend, get_rank,
                            get_world_size, init_process_group, is_available, is_initialized,
                            is_mpi_available, is_nccl_available, reset_comm_stats)
from .simworld import SimWorld
from .store import TCPStore
from .work import Work
from .zero import ZeroRedundancyOptimizer
from . import algorithms, fsdp, pipelining, tensor_parallel  # noqa: E402  (subpackages, as torch.distributed's)

__all__ = ["DeviceMesh", "DistributedDataParallel", "DistributedError", "DistTimeoutError", "GroupMember", "ReduceOp",
           "SimWorld", "TCPStore", "Work", "ZeroRedundancyOptimizer", "all_gather", "all_gather_into_tensor",
           "all_reduce", "barrier", "broadcast", "comm_log", "comm_stats", "destroy_process_group", "get_backend",
           "get_global_rank", "get_group_rank", "get_process_group_ranks", "get_rank", "get_world_size",
           "init_device_mesh", "init_process_group", "irecv", "is_available", "is_initialized",
           "is_mpi_available", "is_nccl_available", "isend", "new_group", "recv", "reduce_scatter",
           "reduce_scatter_tensor", "reset_comm_stats", "send"]
