"""One small exception hierarchy.

Every class also subclasses the matching built-in (ValueError, TypeError, RuntimeError, IndexError), so
ordinary ``except ValueError`` clauses keep working. Messages name the op and what was wrong, e.g.
``matmul: shapes (3, 4) and (5, 6) are not aligned (4 != 5)``.
"""


class MinigradError(Exception):
    """Base class of every error minigrad raises on purpose."""


class ShapeError(MinigradError, ValueError):
    """Shapes that do not fit the op (broadcasting, matmul, reshape, cat, conv channels...)."""


class DTypeError(MinigradError, TypeError):
    """A dtype the op cannot take (float indices, requires_grad on an integer tensor...)."""


class DeviceError(MinigradError, RuntimeError):
    """Tensors on different devices, or a device that does not exist here."""


class OpIndexError(MinigradError, IndexError):
    """An index or class target out of range."""


class ArgumentError(MinigradError, ValueError):
    """A bad argument value (negative dropout probability, unknown reduction...)."""


class ArgumentTypeError(MinigradError, TypeError):
    """An argument of the wrong type: a NumPy array or a list where the op needs a Tensor."""


class AutogradError(MinigradError, RuntimeError):
    """Misuse of the autograd engine (backward twice, non-scalar backward, in-place on a leaf...)."""


class InplaceModificationError(AutogradError):
    """A tensor saved for backward was modified in place before backward ran."""


class GradientError(AutogradError):
    """An op's backward returned a gradient of the wrong shape or dtype."""


class AnomalyError(AutogradError):
    """detect_anomaly() found a non-finite value; the message names the op that produced it."""


class GradcheckError(AutogradError):
    """gradcheck found an analytic gradient that disagrees with central differences."""


class OutOfMemoryError(MinigradError, RuntimeError):
    """The memory pool could not satisfy a request, even after releasing its cache."""


class StateDictError(MinigradError, RuntimeError):
    """load_state_dict found missing, unexpected or shape-mismatched keys (all listed in the message)."""


class CheckpointError(MinigradError, ValueError):
    """A checkpoint file that is truncated, corrupt, foreign or of an unsupported version."""


class WorkerError(MinigradError, RuntimeError):
    """A DataLoader worker process failed; the message carries the worker's traceback."""


class DistributedError(MinigradError, RuntimeError):
    """A distributed job went wrong: mismatched tensors across ranks, unused parameters, a bad backend."""


class DistTimeoutError(DistributedError, TimeoutError):
    """A collective or the rendezvous did not complete in time; the message names the missing ranks."""


class UnavailableError(MinigradError, RuntimeError):
    """A PyTorch feature minigrad deliberately lacks (a network model hub, TorchScript archives); the message
    says what to do instead."""
