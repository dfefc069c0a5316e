"""``minigrad.special``: the ``torch.special`` functions minigrad has (the same functions as ``mg.erf``...)."""
from .ops import erf, erfc, logsumexp  # noqa: F401
from .ops.nn.activation import log_softmax, sigmoid as expit, softmax  # noqa: F401
