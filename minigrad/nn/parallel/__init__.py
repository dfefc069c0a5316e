"""``mg.nn.parallel``: where PyTorch programs import ``DistributedDataParallel`` from
(``from torch.nn.parallel import DistributedDataParallel as DDP``). It is ``mg.distributed``'s class
itself, not a copy: ``minigrad/distributed/ddp.py`` is the one implementation."""
from ...distributed.ddp import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
