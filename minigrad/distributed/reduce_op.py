"""``ReduceOp``: how collectives combine the ranks' tensors; its own module because the process group and
every backend need it, and the process group picks a backend by name (so they must not import each other)."""
import enum


class ReduceOp(enum.Enum):
    """How ``all_reduce`` / ``reduce_scatter`` combine the ranks' tensors (PyTorch's names)."""
    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
