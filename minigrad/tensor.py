"""Tensor: what a tensor is (``tensor_base.py``) and what it does, one mixin per op family.

Each mixin sits at the end of its family's module, beside the functions it names: ``x + y`` is
``ops/elementwise.py``'s ``add(x, y)``, ``x.sum(1)`` is ``ops/reduce.py``'s ``sum(x, 1)``, and so on.
Everything ``Tensor`` has is defined here, in ordinary class definitions; nothing is bound onto it later.
"""
from .autograd.function import bind_tensor_class
from .ops.compare import CompareMethods
from .ops.elementwise import ElementwiseMethods
from .ops.indexing import IndexingMethods
from .ops.inplace import InplaceMethods
from .ops.linalg import LinalgMethods
from .ops.nn.activation import ActivationMethods
from .ops.pointwise import PointwiseMethods
from .ops.reduce import ReduceMethods
from .ops.shape import ShapeMethods
from .ops.sort import SortMethods
from .ops.transfer import TransferMethods
from .tensor_base import TensorBase, tensor  # noqa: F401  (``tensor`` is re-exported: mg.tensor)


class Tensor(TensorBase, ElementwiseMethods, CompareMethods, ReduceMethods, LinalgMethods, ShapeMethods,
             IndexingMethods, InplaceMethods, TransferMethods, ActivationMethods, SortMethods, PointwiseMethods):
    """A multi-dimensional array on a device, with autograd. ``mg.tensor(data)`` makes one from data;
    ops make the rest."""
    __slots__ = ()


bind_tensor_class(Tensor)
