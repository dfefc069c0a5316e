"""Function: one differentiable op, forward and backward side by side.

``Op.apply(*inputs)`` unwraps tensors to backend arrays, runs ``forward(ctx, *arrays)`` and wraps the
result in a Tensor. When grad mode is on and an input requires grad, the ctx becomes the result's
``grad_fn``: a node of the graph holding the saved arrays and one edge per input. The engine later calls
``backward(ctx, grad)``, which returns one gradient per input (None for non-differentiable inputs).
Un-broadcasting, shape/dtype checks of returned gradients and version checks of saved arrays are done once,
in the engine, never in ops. Unlike PyTorch, ``forward`` receives backend arrays (NumPy/CuPy), not Tensors:
an op is written directly in array maths, and ``ctx.xp`` is the array module of the inputs' device.
"""
import re
import weakref

import numpy as np

from ..backend.device import get_backend
from ..backend.layout import empty_in_order, memory_order
from ..errors import AutogradError, DeviceError, MinigradError, ShapeError, DTypeError, OpIndexError
from . import anomaly, grad_mode

_grad = grad_mode._state
_anomaly = anomaly.state
_saved_hooks = []  # stack of (pack, unpack) pairs, see saved_tensors_hooks
Tensor = None  # bound by minigrad.tensor (the core's one import cycle, broken here)

_FLOATING = frozenset("fc")
_new = object.__new__
# NumPy < 2 promotes float32 0-d arrays combined with Python floats to float64 (value-based casting);
# NumPy 2 (NEP 50) keeps float32. Under NumPy 1.x, results are cast back to their inputs' float dtype.
LEGACY_PROMOTION = np.lib.NumpyVersion(np.__version__) < "2.0.0"


def _snake(name):
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


class Function:
    """Base class of ops. Subclasses define static ``forward(ctx, ...)`` and ``backward(ctx, grad)``."""

    name = "function"  # the op's name in messages; set per subclass from the class name
    # per-node defaults, overridden on the instance when used
    _pre_hooks = None   # tensor hooks (register_hook on the output)
    _versions = ()      # (version counter, version at save time, label) per saved input
    _unpack = None      # saved_tensors_hooks unpack function
    _non_diff = False
    _saved = ()         # what save_for_backward kept; None once backward freed it
    next = ()
    fused = None
    exact_dtype = False  # True for ops whose output dtype is their point (Cast): never re-cast

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if "name" not in cls.__dict__:
            cls.name = _snake(cls.__name__)

    # --- ctx API used inside forward/backward ------------------------------------------------------
    def save_for_backward(self, *arrays):
        """Keep arrays for backward. In-place changes to them before backward are detected."""
        if _saved_hooks:  # pack arrays only: numbers and None saved alongside pass through untouched
            pack, self._unpack = _saved_hooks[-1]
            self._packed = tuple(isinstance(a, self.xp.ndarray) for a in arrays)
            self._raw = arrays  # apply() takes the version records from these, then drops them
            arrays = tuple(pack(a) if p else a for a, p in zip(arrays, self._packed))
        self._saved = arrays

    @property
    def saved_tensors(self):
        if self._saved is None:
            raise AutogradError(
                f"{self.name}: trying to backward through the graph a second time (or to read saved "
                f"tensors after they were freed). Pass retain_graph=True to the first backward() "
                f"if you need to backward twice.")
        unpack = self._unpack
        return self._saved if unpack is None else tuple(unpack(a) if p else a
                                                        for a, p in zip(self._saved, self._packed))

    def empty(self, shape, dtype):
        """Uninitialised storage on this op's device, from the memory pool when one is installed.

        Hot ops write their results into it (``xp.matmul(a, b, out=ctx.empty(...))``) so that, with the
        pool on, a result is born in a pool block instead of being copied into one afterwards.
        """
        return self.device.backend.empty(shape, dtype)

    def empty_like(self, shape, dtype, like):
        """``empty`` with the memory layout of the array ``like`` (same ndim): a channels-last input gets a
        channels-last result, so the op's passes read and write memory in order (backend/layout.py)."""
        return empty_in_order(self.device.backend.empty, shape, dtype, memory_order(like))

    def mark_non_differentiable(self):
        """The output never requires grad (argmax-like results computed through apply)."""
        self._non_diff = True

    # --- apply: the forward pass of the graph ------------------------------------------------------
    @classmethod
    def apply(cls, *args, **kwargs):
        ctx = cls.__new__(cls)
        device = None
        track = False       # record this op in the graph?
        enabled = _grad.enabled
        raw = []            # arguments with tensors unwrapped to their arrays
        needs = []          # needs_input_grad
        edges = []          # per argument: (the input's node, its shape, its dtype), or None
        for a in args:
            if isinstance(a, Tensor):
                d = a.device
                if device is None:
                    device = d
                elif d is not device and d != device:
                    raise DeviceError(f"{cls.name}: tensors on different devices ({device}, {d})")
                data = a.data
                raw.append(data)
                if a.requires_grad and enabled:
                    track = True
                    needs.append(True)
                    edges.append((a.grad_fn or a._accumulator(), data.shape, data.dtype))
                    continue
            else:
                raw.append(a)
            needs.append(False)
            edges.append(None)
        if device is None:
            raise AutogradError(f"{cls.name}: apply() needs at least one Tensor argument")
        be = device.backend or get_backend(device)
        ctx.xp = be.xp
        if be.fused is not None:
            ctx.fused = be.fused
        ctx.device = device
        ctx.needs_input_grad = tuple(needs)
        alloc = be.allocator
        if alloc is not None:  # the memory pool labels what this op allocates
            prev_op, alloc.current_op = alloc.current_op, cls.name
        try:
            out = cls.forward(ctx, *raw, **kwargs)
            if ctx.device is not device:  # the forward put its output on another device (ToDevice)
                device, be = ctx.device, get_backend(ctx.device)
            if type(out) is not be.array_type:
                out = be.asarray(out)
            if LEGACY_PROMOTION and out.dtype.char == "d" and not cls.exact_dtype:
                out = _undo_legacy_promotion(out, raw)
            if alloc is not None and be.allocator is alloc:  # (a moved output is in its device's storage)
                out = _into_pool(ctx, alloc, out, track, be.array_type)
        except MinigradError:
            raise
        except (ValueError, TypeError, IndexError, ZeroDivisionError, OverflowError) as e:
            raise _op_error(cls.name, args, e) from None
        finally:
            if alloc is not None:
                alloc.current_op = prev_op
        if _anomaly.enabled:
            anomaly.check(out, ctx.xp, cls.name, "output")
        result = _new(Tensor)  # Tensor._make, inlined: this is the hottest path of the framework
        result.data = out
        result.device = device
        result.grad = None
        result._vc = [0]
        if track and out.dtype.kind in _FLOATING and not ctx._non_diff:
            result.requires_grad = True
            result.grad_fn = ctx
            ctx.next = tuple(edges)
            if ctx._saved:
                ctx._versions = _version_records(ctx, args, raw, out, result)
        else:
            result.requires_grad = False
            result.grad_fn = None
        return result


def _into_pool(ctx, alloc, out, track, array_type):
    """With a memory pool on: the output (and what backward will read) must live in pool blocks."""
    pooled = alloc.adopt(out)
    if pooled is not out and ctx._saved:
        _resave(ctx, out, pooled)
    if track and ctx._saved and ctx._unpack is None:
        # intermediates saved for backward are activation memory too: keep them in the pool
        ctx._saved = tuple(alloc.adopt(a) if type(a) is array_type else a for a in ctx._saved)
    return pooled


def _resave(ctx, old, new):
    """The pool copied the output into its storage: an op that saved its output must keep that copy (one
    array in memory, and in-place changes to the output stay detectable by the version check)."""
    ctx._saved = tuple(new if s is old else s for s in ctx._saved)
    if ctx._unpack is not None:
        ctx._raw = tuple(new if s is old else s for s in ctx._raw)


def _undo_legacy_promotion(out, raw):
    floats = [a.dtype for a in raw if hasattr(a, "dtype") and a.dtype.kind == "f"]
    if floats and np.dtype("float64") not in floats:
        return out.astype(max(floats, key=lambda d: d.itemsize))
    return out


def _version_records(ctx, args, raw, out, result):
    """For each saved array that is an argument's (or the output's) storage: (counter, version at save
    time, argument position, -1 for the output). The engine compares versions before running backward."""
    saved = ctx._saved
    if ctx._unpack is not None:  # packed by saved_tensors_hooks: record the originals' versions
        saved, ctx._raw = ctx._raw, None
    records = []
    for s in saved:
        if s is out:
            records.append((result._vc, 0, -1))
            continue
        i = 0
        for r in raw:  # raw[i] is args[i] unwrapped
            if r is s:
                a = args[i]
                if isinstance(a, Tensor):
                    vc = a._vc
                    records.append((vc, vc[0], i))
                break
            i += 1
    return records


def _op_error(name, args, exc):
    """Turn a raw NumPy error into a minigrad error naming the op, shapes and dtypes."""
    shapes = ", ".join(str(tuple(a.shape)) for a in args if isinstance(a, Tensor))
    dts = ", ".join(a.dtype.name for a in args if isinstance(a, Tensor))
    msg = f"{name}: {exc} (input shapes {shapes}; dtypes {dts})"
    if isinstance(exc, IndexError):
        return OpIndexError(msg)
    if isinstance(exc, TypeError):
        return DTypeError(msg)
    return ShapeError(msg)


class AccumulateGrad:
    """The graph node of a leaf tensor: adds the incoming gradient into ``leaf.grad``."""

    __slots__ = ("tensor_ref", "next", "_pre_hooks", "__weakref__")
    name = "accumulate_grad"

    def __init__(self, tensor):
        self.tensor_ref = weakref.ref(tensor)
        self.next = ()
        self._pre_hooks = None

    def accumulate(self, grad, shared=False):
        """Set or ``+=`` the leaf's ``.grad``. The first gradient is kept without a copy when nothing else can
        see its memory: not ``shared`` (another input received the same array) and not a view of another
        array (a reshape of a gradient that went elsewhere too); later ``+=`` would otherwise leak into it."""
        t = self.tensor_ref()
        if t is None:
            return
        if t.grad is None:
            if shared or isinstance(grad.base, type(grad)) or not grad.flags.c_contiguous \
                    or not getattr(grad.flags, "writeable", True):
                grad = grad.copy()
            be = get_backend(t.device)
            if be.allocator is not None:
                grad = be.adopt(grad)
            t.grad = Tensor._make(grad, t.device)
        else:
            t.grad.data += grad
        hooks = getattr(t, "_post_acc_hooks", None)
        if hooks:
            for hook in hooks:
                hook(t)


class saved_tensors_hooks:
    """Context manager: ``pack`` every array saved for backward, ``unpack`` it when backward reads it.

    The lever for activation offloading/compression lessons; checkpointing uses recomputation instead.
    """

    def __init__(self, pack_hook, unpack_hook):
        self.hooks = (pack_hook, unpack_hook)

    def __enter__(self):
        _saved_hooks.append(self.hooks)
        return self

    def __exit__(self, *exc):
        _saved_hooks.pop()
        return False
