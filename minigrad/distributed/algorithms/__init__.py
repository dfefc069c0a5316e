"""Algorithms on top of the collectives: DDP communication hooks (``ddp_comm_hooks``), PyTorch's layout."""
