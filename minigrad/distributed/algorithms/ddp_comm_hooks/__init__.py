"""DDP communication hooks, as ``torch.distributed.algorithms.ddp_comm_hooks``:

    ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)          # half the bytes
    ddp.register_comm_hook(PowerSGDState(None, matrix_approximation_rank=1), powerSGD_hook)
"""
from . import default_hooks, powerSGD_hook as powerSGD
from .default_hooks import Future, allreduce_hook, fp16_compress_hook
from .powerSGD_hook import PowerSGDState, powerSGD_hook

__all__ = ["Future", "PowerSGDState", "allreduce_hook", "default_hooks", "fp16_compress_hook", "powerSGD",
           "powerSGD_hook"]
