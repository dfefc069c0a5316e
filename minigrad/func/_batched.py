"""BatchedTensor: what a function under ``vmap`` sees in place of a batch of tensors.

One explicit object holds both views of a batch:

- ``physical``: a plain Tensor whose leading dims are the batch dims, one per active ``vmap`` level
  (``levels``, outermost first). Batching rules compute on it; autograd records on it (a BatchedTensor
  shares its ``grad_fn``, ``requires_grad`` and version counter, so the graph is the physical one).
- the tensor's own storage: a read-only view of the *first example* (``physical[0, ..., 0, ...]``), so
  that everything an op's Python wrapper checks before ``Function.apply`` (shape, ndim, dtype, size) is
  the logical, per-example value, as in PyTorch's vmap. The values are never computed with: ``vmap``'s
  forward wrapper hands ops the physical tensor instead, and reading values out (``item()``, ``numpy()``,
  ``bool()``) or writing in place raises, naming vmap.

Who uses it: ``vmap.py`` (entering and leaving levels), ``rules*.py`` (batching rules) and
``transforms.py`` (``grad`` inside ``vmap`` differentiates the physical graph).
"""
import contextvars

from ..errors import MinigradError
from ..tensor import Tensor


class VmapError(MinigradError, RuntimeError):
    """An op or a Tensor method that ``vmap`` cannot batch; the message names it."""


_levels = contextvars.ContextVar("minigrad.func.vmap_levels", default=())  # ((level, size), ...), per thread


def active_levels():
    """The vmap levels active in this thread, outermost first (a tuple of ints)."""
    return tuple(lv for lv, _ in _levels.get())


def active_sizes():
    """``{level: batch size}`` of the vmap levels active in this thread."""
    return dict(_levels.get())


def push_level(level, size):
    """Enter a vmap level in this thread; returns the token ``pop_level`` takes."""
    return _levels.set(_levels.get() + ((level, size),))


def pop_level(token):
    _levels.reset(token)


def raw(t):
    """A tensor's backend array (the one place that names the storage field)."""
    return t.array


class BatchedTensor(Tensor):
    """A tensor inside ``vmap``: the per-example view of ``physical`` (see the module docstring)."""
    __slots__ = ("physical", "levels")

    def _refuse(self, what):
        raise VmapError(f"{what}: not supported on a tensor batched by vmap (levels {self.levels}, "
                        f"per-example shape {tuple(self.shape)}); its value differs per example. Return it "
                        f"from the function instead, or compute with tensor ops")

    def item(self):
        self._refuse("item()")

    def numpy(self):
        self._refuse("numpy()")

    def tolist(self):
        self._refuse("tolist()")

    def __array__(self, dtype=None, copy=None):
        self._refuse("conversion to a NumPy array")

    def __bool__(self):
        self._refuse("bool() (data-dependent control flow)")

    def __float__(self):
        self._refuse("float()")

    def __int__(self):
        self._refuse("int()")

    def __index__(self):
        self._refuse("use as an index")

    @property
    def data(self):
        """PyTorch's ``.data`` of every example: the batch, cut from the graph (not the first example)."""
        return wrap(self.physical.detach(), self.levels)

    @data.setter
    def data(self, value):
        self._refuse("setting .data")

    def requires_grad_(self, requires_grad=True):
        self._refuse("requires_grad_() (make the input require grad outside vmap, or use minigrad.func.grad)")

    def backward(self, gradient=None, retain_graph=False, **kw):
        self._refuse("backward() (use minigrad.func.grad or vjp inside vmap)")

    def __repr__(self):
        p = self.physical
        return (f"BatchedTensor(levels={self.levels}, shape={tuple(self.shape)}, "
                f"physical shape={tuple(p.shape)}, dtype={self.dtype})")


def wrap(physical, levels):
    """A BatchedTensor over the plain Tensor ``physical`` whose first ``len(levels)`` dims are batch dims."""
    if not levels:
        return physical
    arr = raw(physical)
    example = arr[(0,) * len(levels) + (Ellipsis,)]
    if example.base is None or example is arr:
        example = example.view()
    try:
        example.flags.writeable = False
    except (AttributeError, ValueError):   # CuPy arrays have no flags to set
        pass
    t = object.__new__(BatchedTensor)
    t.array = example
    t.device = physical.device
    t.requires_grad = physical.requires_grad
    t.grad = None
    t.grad_fn = physical.grad_fn
    t._version_counter = physical._version_counter
    t.physical = physical
    t.levels = tuple(levels)
    return t


def physical_of(t):
    """The plain Tensor behind ``t`` (``t`` itself when it is not batched)."""
    return t.physical if isinstance(t, BatchedTensor) else t
