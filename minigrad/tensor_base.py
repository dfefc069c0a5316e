"""TensorBase: what a tensor *is* -- storage (a backend array on a device) plus autograd metadata.

A tensor owns ``data`` (a NumPy or CuPy array), knows its ``device`` and, when it was produced by a
recorded op, its ``grad_fn`` (the graph node that will send gradients to the op's inputs). Leaves are
tensors without ``grad_fn``; when they ``requires_grad`` the engine accumulates into their ``.grad``.

What a tensor *does* (operators, indexing, reductions, in-place methods, ``to``) is defined next to the
ops, one mixin per op family (``ops/elementwise.py: ElementwiseMethods``...), and ``tensor.py`` puts the
class together: ``class Tensor(TensorBase, ElementwiseMethods, ...)``. The split is what lets both be
ordinary class definitions: ops check ``isinstance(x, TensorBase)`` and make results with
``TensorBase._make``, so they never import ``tensor.py``, which imports them.
"""
import math

import numpy as np

from ._tensor_str import array_str
from .autograd import engine as _engine, extensions as _ext, function as _function, grad_mode
from .autograd.function import AccumulateGrad, RemovableHandle, VersionCounter
from .backend import dtypes
from .backend.device import CPU, device as _device, get_backend
from .errors import ArgumentTypeError, AutogradError, DTypeError, ShapeError


class Size(tuple):
    """A tensor's shape (``t.shape``, ``t.size()``): a tuple of ints with PyTorch's ``numel()``; slicing it
    or adding a tuple gives a ``Size`` again. Ops read their arrays' shapes (plain tuples) instead."""
    __slots__ = ()

    def numel(self):
        return math.prod(self)

    def __getitem__(self, i):
        got = tuple.__getitem__(self, i)
        return Size(got) if isinstance(i, slice) else got

    def __add__(self, other):
        return Size(tuple.__add__(self, tuple(other)))

    def __radd__(self, other):
        return Size(tuple(other) + tuple(self))

    def __repr__(self):
        return f"minigrad.Size([{', '.join(str(n) for n in self)}])"


_size = tuple.__new__


class TensorBase:
    __slots__ = ("array", "device", "requires_grad", "grad", "grad_fn", "_version_counter", "_acc",
                 "_post_acc_hooks", "_is_view", "_retain", "_fw", "__weakref__")  # _fw: autograd/forward_ad.py
    __array_priority__ = 1000  # make ndarray (op) Tensor defer to Tensor's reflected operators

    def __init__(self, *data, dtype=None, device=None, requires_grad=False):
        """``Tensor(data)``: a copy of ``data``, where lists of Python numbers take the default float dtype (as
        ``torch.Tensor``; arrays and tensors keep theirs). ``Tensor(3, 4)`` or ``Tensor(size)``: zeros of that
        size (PyTorch's are uninitialised); ``Tensor()``: an empty 1-D tensor."""
        if all(isinstance(n, int) and not isinstance(n, bool) for n in data) or \
                (len(data) == 1 and isinstance(data[0], Size)):
            shape = tuple(data[0]) if data and isinstance(data[0], Size) else data or (0,)
            if any(n < 0 for n in shape):
                raise ShapeError(f"Tensor: sizes must be non-negative, got {shape}")
            dt = dtypes.np_dtype(dtype) or dtypes.default_float.np_dtype
            data = (np.zeros(shape, dtype=dt),)
        elif len(data) != 1:
            raise ArgumentTypeError(f"Tensor: expected one data argument or sizes (ints), got {len(data)} "
                                    f"arguments of types {[type(d).__name__ for d in data]}")
        elif dtype is None and isinstance(data[0], (list, tuple)):
            dtype = dtypes.default_float
        t = tensor(data[0], dtype=dtype, device=device, requires_grad=requires_grad)
        for name in ("array", "device", "requires_grad", "grad", "grad_fn", "_version_counter"):
            object.__setattr__(self, name, getattr(t, name))

    @staticmethod
    def _make(data, device, requires_grad=False):
        """Fast internal constructor: a ``Tensor`` around a backend array already on ``device`` (no copy,
        no checks). The class is the one ``tensor.py`` hands to autograd (``bind_tensor_class``)."""
        t = object.__new__(_function.Tensor)
        t.array = data
        t.device = device
        t.requires_grad = requires_grad
        t.grad = None
        t.grad_fn = None
        t._version_counter = VersionCounter()
        return t  # _acc, _post_acc_hooks, _is_view, _retain stay unset until used (read with defaults)

    # --- storage: ``.array`` is the backend array; ``.data`` is PyTorch's ---------------------------
    @property
    def data(self):
        """PyTorch's ``.data``: a tensor on the same storage, cut from the graph (``requires_grad=False``), whose
        in-place changes autograd does not see (it has its own version counter). ``p.data.add_(u)`` updates
        ``p`` behind autograd's back, as in PyTorch. The raw NumPy/CuPy array is ``.array``."""
        return TensorBase._make(self.array, self.device)

    @data.setter
    def data(self, value):
        if not isinstance(value, TensorBase):
            raise TypeError(f"Tensor.data: expected a Tensor to take the storage of, got {type(value).__name__} "
                            f"(to set the raw NumPy/CuPy array, assign .array)")
        self.array, self.device = value.array, value.device

    # --- metadata ---------------------------------------------------------------------------------
    @property
    def shape(self):
        return _size(Size, self.array.shape)

    @property
    def ndim(self):
        return self.array.ndim

    @property
    def dtype(self):
        return dtypes.from_numpy_dtype(self.array.dtype)

    @property
    def is_leaf(self):
        return self.grad_fn is None

    @property
    def _version(self):
        return self._version_counter.value

    @property
    def is_cuda(self):
        return self.device.type == "cuda"

    @property
    def itemsize(self):
        return self.array.itemsize

    @property
    def nbytes(self):
        return self.array.nbytes

    def size(self, dim=None):
        return _size(Size, self.array.shape) if dim is None else self.array.shape[dim]

    def dim(self):
        return self.array.ndim

    def numel(self):
        return int(self.array.size)

    nelement = numel

    def element_size(self):
        return self.array.itemsize

    def is_floating_point(self):
        return self.array.dtype.kind in dtypes.FLOAT_KINDS

    def __len__(self):
        if self.array.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.array.shape[0]

    def __iter__(self):
        if self.array.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.array.shape[0]))

    __hash__ = object.__hash__

    # --- copying and pickling: values and requires_grad, never graph state ------------------------
    def __deepcopy__(self, memo):
        if self.grad_fn is not None:
            raise AutogradError("deepcopy: only leaf tensors can be deep-copied (detach() first)")
        t = TensorBase._make(self.array.copy(), self.device, self.requires_grad)
        if self.grad is not None:
            t.grad = TensorBase._make(self.grad.array.copy(), self.device)
        memo[id(self)] = t
        return t

    def __reduce_ex__(self, protocol):
        host = get_backend(self.device).to_host(self.array)
        return (_rebuild, (host, str(self.device), self.requires_grad))

    # --- conversion -------------------------------------------------------------------------------
    def numpy(self):
        if _ext.host_reads:
            _ext.host_read(self, "numpy")
        if self.requires_grad and grad_mode.is_grad_enabled():
            raise AutogradError("numpy(): can't call numpy() on a tensor that requires grad; "
                                "use tensor.detach().numpy()")
        return self.device.backend.to_host(self.array) if self.device is not CPU else self.array

    def item(self):
        if _ext.host_reads:
            _ext.host_read(self, "item")
        if self.array.size != 1:
            raise ShapeError(f"item(): only one-element tensors can be converted to Python scalars "
                             f"(shape {tuple(self.shape)})")
        return self.array.reshape(()).item() if self.device is CPU else \
            get_backend(self.device).to_host(self.array).reshape(()).item()

    def tolist(self):
        if _ext.host_reads:
            _ext.host_read(self, "tolist")
        return get_backend(self.device).to_host(self.array).tolist()

    def __array__(self, dtype=None, copy=None):
        if _ext.host_reads:
            _ext.host_read(self, "array")
        arr = get_backend(self.device).to_host(self.array)
        return arr if dtype is None else arr.astype(dtype, copy=False)

    def __float__(self):
        if _ext.host_reads:
            _ext.host_read(self, "float")
        return float(self.item())

    def __int__(self):
        if _ext.host_reads:
            _ext.host_read(self, "int")
        return int(self.item())

    def __index__(self):
        if _ext.host_reads:
            _ext.host_read(self, "index")
        if self.array.dtype.kind not in "iub" or self.array.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __bool__(self):
        if _ext.host_reads:
            _ext.host_read(self, "bool")
        if self.array.size != 1:
            raise ShapeError(f"bool(): the truth value of a tensor with {self.array.size} elements is ambiguous "
                             f"(shape {tuple(self.shape)}); use .any() or .all()")
        return bool(self.item())

    def __repr__(self):
        """PyTorch's printed form (``_tensor_str.py``): ``tensor([0.5000, 1.2500], requires_grad=True)``."""
        if _ext.host_reads:
            _ext.host_read(self, "repr")
        arr = get_backend(self.device).to_host(self.array)
        extra = []
        if arr.size == 0 and arr.ndim != 1:
            extra.append(f"size={tuple(arr.shape)}")
        if self.device is not CPU:
            extra.append(f"device='{self.device}'")
        if self.array.dtype not in (np.float32, np.int64, np.bool_):
            extra.append(f"dtype={self.dtype}")
        if self.grad_fn is not None:
            extra.append(f"grad_fn={self.grad_fn!r}")  # <Mul>: the node is the Mul op's ctx
        elif self.requires_grad:
            extra.append("requires_grad=True")
        return "tensor(" + array_str(arr) + "".join(", " + e for e in extra) + ")"

    def __format__(self, spec):
        """PyTorch's rule: a 0-d tensor formats as its value (``f"{loss:.4f}"``; ``f"{loss}"`` is ``1.5``);
        other tensors print as ``str()`` with an empty spec and refuse any other."""
        if self.array.ndim == 0:
            return format(self.item(), spec)
        return object.__format__(self, spec)

    # --- autograd ---------------------------------------------------------------------------------
    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Accumulate the gradient of this tensor with respect to every leaf into ``leaf.grad``;
        ``create_graph=True`` makes those gradients differentiable (``autograd.backward``)."""
        _engine.backward((self,), None if gradient is None else (gradient,), retain_graph, create_graph, inputs)

    def _accumulator(self):
        try:
            return self._acc
        except AttributeError:  # first use: create the leaf's node once, so every op shares it
            acc = self._acc = AccumulateGrad(self)
            return acc

    def requires_grad_(self, requires_grad=True):
        if requires_grad and self.array.dtype.kind not in "fcV":   # V: bfloat16
            raise DTypeError(f"requires_grad_: only floating point tensors can require gradients "
                             f"(got {self.dtype})")
        if not requires_grad and self.grad_fn is not None:
            raise AutogradError("requires_grad_(False) on a non-leaf tensor; use detach()")
        self.requires_grad = requires_grad
        return self

    @_ext.outside_apply
    def detach(self):
        """Same storage, cut from the graph (shares the version counter, like PyTorch)."""
        t = TensorBase._make(self.array, self.device)
        t._version_counter = self._version_counter
        return t

    def detach_(self):
        self.grad_fn = None
        self.requires_grad = False
        return self

    def retain_grad(self):
        """Keep ``.grad`` on a non-leaf tensor after backward."""
        if self.grad_fn is None or getattr(self, "_retain", False):
            return
        import weakref
        ref = weakref.ref(self)

        def hook(g):
            t = ref()
            if t is not None:
                if t.grad is None:
                    t.grad = TensorBase._make(g.array.copy(), t.device)
                else:
                    t.grad.array += g.array
        self._retain = True
        self.register_hook(hook)
        hook.retains_grad = True  # register_hook keeps it last: .grad is the gradient after all hooks

    def register_hook(self, hook):
        """Call ``hook(grad) -> new grad or None`` when this tensor's gradient is computed."""
        if not self.requires_grad:
            raise AutogradError("register_hook: cannot register a hook on a tensor that doesn't require grad")
        return (self.grad_fn or self._accumulator()).register_prehook(hook)

    def register_post_accumulate_grad_hook(self, hook):
        """On a leaf: call ``hook(tensor)`` after its ``.grad`` was accumulated (DDP starts all-reduces here)."""
        if self.grad_fn is not None:
            raise AutogradError("register_post_accumulate_grad_hook: only leaf tensors accumulate gradients")
        if getattr(self, "_post_acc_hooks", None) is None:
            self._post_acc_hooks = []
        self._post_acc_hooks.append(hook)
        return RemovableHandle(self._post_acc_hooks, hook)

    # --- memory layout (``contiguous``, ``stride``: ops/shape.py; ``to``, ``half()``...: ops/transfer.py) --
    def is_contiguous(self):
        """True when the memory is C-order. A conv's output is not: it is channels-last memory viewed as
        (N, C, H, W), as with PyTorch's ``memory_format=torch.channels_last``."""
        return bool(self.array.flags.c_contiguous)


def _rebuild(host, device, requires_grad):
    """Unpickle a tensor (DataLoader workers, deepcopy of containers); weights use mg.save, not pickle."""
    return tensor(host, device=device, requires_grad=requires_grad)


def _default_dtype_for(host):
    """float32 for Python floats (PyTorch's default), int64 for ints, bool for bools."""
    kind = host.dtype.kind
    if kind == "f":
        return dtypes.default_float.np_dtype
    if kind in "iu":
        return np.dtype(np.int64)
    if kind == "b":
        return np.dtype(np.bool_)
    raise DTypeError(f"tensor: cannot make a tensor from data of dtype {host.dtype}")


@_ext.outside_apply
def tensor(data, dtype=None, device=None, requires_grad=False):
    """A new tensor holding a copy of ``data`` (nested lists, numbers, NumPy arrays, Tensors).

    Python floats become float32, ints int64; NumPy arrays keep their dtype (as torch.tensor does).
    """
    dev = _device(device) if device is not None else (data.device if isinstance(data, TensorBase) else CPU)
    be = get_backend(dev)
    if isinstance(data, TensorBase):
        host = data.array if data.device == dev else get_backend(data.device).to_host(data.array)
        np_dt = dtypes.np_dtype(dtype) or data.array.dtype
    else:
        if isinstance(data, (list, tuple)) and any(isinstance(x, TensorBase) for x in data):
            data = [x.tolist() if isinstance(x, TensorBase) else x for x in data]
        is_array = isinstance(data, np.ndarray) or type(data).__module__.startswith("cupy")
        try:
            host = data if is_array else np.asarray(data)
        except ValueError:  # NumPy refuses ragged nested lists
            raise ShapeError("tensor: ragged nested sequences (rows of different lengths) cannot make a "
                             "tensor") from None
        if host.dtype == object:
            raise DTypeError("tensor: ragged or non-numeric data cannot make a tensor")
        if dtype is not None:
            np_dt = dtypes.np_dtype(dtype)
        elif is_array or isinstance(data, np.generic):
            np_dt = dtypes.from_numpy_dtype(host.dtype).np_dtype
        else:
            np_dt = _default_dtype_for(host)
    arr = be.empty(host.shape, np_dt)
    if be.xp is np or type(host) is be.array_type:
        arr[...] = host
    else:
        arr[...] = be.asarray(np.asarray(host))
    t = TensorBase._make(arr, dev)
    if requires_grad:
        t.requires_grad_(True)
    return t

