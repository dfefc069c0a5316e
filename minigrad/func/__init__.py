"""Function transforms with torch.func's names: ``grad``, ``grad_and_value``, ``vjp``, ``jvp``, ``jacrev``,
``jacfwd``, ``hessian`` and ``vmap``. They take a function and return a function; nothing is patched and
every mode they enter is per thread. ``vmap``'s batching rules are a registry keyed by op (``rules.py``)."""
from ._batched import BatchedTensor, VmapError
from .rules import registered_ops
from .transforms import grad, grad_and_value, hessian, jacfwd, jacrev, jvp, vjp
from .vmap import vmap

__all__ = ["BatchedTensor", "VmapError", "grad", "grad_and_value", "hessian", "jacfwd", "jacrev", "jvp",
           "registered_ops", "vjp", "vmap"]
