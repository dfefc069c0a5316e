"""Parameter: a leaf Tensor that a Module registers as learnable (``requires_grad=True`` by default).

``Parameter`` subclasses ``Tensor`` (``isinstance(p, mg.Tensor)`` holds), so it works everywhere a tensor
does; ops on it return plain Tensors. Assigning one to a Module attribute registers it. Moving a module
(``.to``, ``.cuda``, ``.double``) swaps ``p.array`` in place and keeps the object, so optimizers built
before the move still hold the right parameters.
"""
import numpy as np

from ..backend.device import device as _device, get_backend
from ..tensor import Tensor, tensor


class Parameter(Tensor):
    __slots__ = ()

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            from ..creation import empty
            data = empty(0)
        elif not isinstance(data, Tensor):
            data = tensor(data)
        p = object.__new__(cls)
        p.array = data.array           # shares storage (and version counter) with ``data``, as in PyTorch
        p.device = data.device
        p.requires_grad = False
        p.grad = None
        p.grad_fn = None
        p._version_counter = data._version_counter
        if requires_grad:
            p.requires_grad_(True)   # refuses integer data with a clear error
        return p

    def __init__(self, data=None, requires_grad=True):
        pass  # everything is done in __new__ (Tensor.__init__ would build a copy)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    # Copies: a fresh leaf with its own storage and graph node (never the original's AccumulateGrad,
    # which would send the copy's gradients to the original).
    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        p = Parameter(Tensor._make(self.array.copy(), self.device), self.requires_grad)
        if self.grad is not None:
            p.grad = Tensor._make(self.grad.array.copy(), self.device)
        memo[id(self)] = p
        return p

    def __reduce_ex__(self, protocol):
        host = np.array(get_backend(self.device).to_host(self.array))
        return _rebuild_parameter, (host, str(self.device), self.requires_grad)


def _rebuild_parameter(host, device, requires_grad):
    return Parameter(tensor(host, device=_device(device)), requires_grad)
