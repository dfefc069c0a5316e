"""Function: one differentiable op, forward and backward side by side.

``Op.apply(*inputs, **options)`` unwraps tensors to backend arrays, runs ``forward(ctx, *arrays, **options)``
and wraps the result in a Tensor. When grad mode is on and an input requires grad, the ctx becomes the
result's ``grad_fn``: a node of the graph holding the saved arrays and one ``Edge`` per positional input.
The engine later calls ``backward(ctx, grad)``, which returns one gradient per positional input (None for
one that needs none). Non-tensor options (dims, flags) are keywords, so they get no edge and no gradient.
Un-broadcasting, shape/dtype checks of returned gradients and version checks of saved arrays are done once,
in the engine, never in ops. Unlike PyTorch, ``forward`` receives backend arrays (NumPy/CuPy), not Tensors:
an op is written directly in array maths, and ``ctx.xp`` is the array module of the inputs' device.
"""
import re
import weakref
from operator import itemgetter

import ml_dtypes
import numpy as np

from ..backend.device import get_backend
from ..backend.layout import empty_in_order, memory_order
from ..errors import AutogradError, DeviceError, MinigradError, ShapeError, DTypeError, OpIndexError
from . import extensions, mode as _mode, opmath
from .extensions import saved_tensors_hooks  # noqa: F401  (re-exported: older import path)

_mode_get = _mode.get
_process = _mode.process
Tensor = None  # the Tensor class, handed over by minigrad/tensor.py: see bind_tensor_class

_FLOATING = frozenset("fcV")   # "V": bfloat16 (backend/dtypes.py)
_BF16 = np.dtype(ml_dtypes.bfloat16)
_new = object.__new__
# NumPy < 2 promotes float32 0-d arrays combined with Python floats to float64 (value-based casting);
# NumPy 2 (NEP 50) keeps float32. Under NumPy 1.x, results are cast back to their inputs' float dtype.
LEGACY_PROMOTION = np.lib.NumpyVersion(np.__version__) < "2.0.0"


def bind_tensor_class(cls):
    """Called once by ``minigrad/tensor.py`` when it defines ``Tensor``.

    autograd never imports ``minigrad.tensor`` (which imports autograd): it works on objects with
    ``data``, ``device``, ``requires_grad``, ``grad``, ``grad_fn`` and ``_accumulator()``, and needs the
    class itself only to wrap results (``apply``) and gradients (hooks, ``autograd.grad``). This call is
    the core's one upward reference, made explicit instead of an import cycle.
    """
    global Tensor
    Tensor = cls
    opmath.Tensor = cls


class VersionCounter:
    """How autograd notices in-place changes: every tensor has one, shared with its views (and with what
    ``detach()`` returns). In-place ops ``bump()`` it; ``Function.apply`` records ``value`` for each saved
    input, and the engine refuses to run a backward whose saved arrays changed since (PyTorch's rule)."""
    value = 0  # a class default, not __init__: one is made per op result, on the hottest path

    def bump(self):
        self.value += 1

    def __repr__(self):
        return f"VersionCounter({self.value})"


class Edge(tuple):
    """One input of a graph node: ``(node, shape, dtype)``, the node that produced the input and the
    input's shape and dtype (the engine un-broadcasts and checks the gradient it sends there against
    them). A plain tuple underneath (``Edge((node, shape, dtype))`` is as cheap as one), with names."""
    __slots__ = ()
    node = property(itemgetter(0))
    shape = property(itemgetter(1))
    dtype = property(itemgetter(2))

    def __repr__(self):
        return f"Edge(node={self[0]!r}, shape={self[1]}, dtype={self[2]})"


def _snake(name):
    """``LeakyReLU`` -> ``leaky_relu``, ``XMLParse`` -> ``xml_parse``: a capital starts a word only where a
    lower-case letter follows it, so acronyms stay whole (``ReLU`` is ``relu``, not ``re_lu``)."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z][a-z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def register_prehook(node, hook):
    """Call ``hook(grad) -> new grad or None`` before ``node`` sends its gradient on (``Tensor.register_hook``
    on the node's output). Hooks run in registration order; ``retain_grad``'s stays last, so ``.grad`` is
    the gradient after every hook. Returns a handle whose ``remove()`` unregisters it."""
    if node._pre_hooks is None:
        node._pre_hooks = []
    hooks = node._pre_hooks
    hooks.insert(len(hooks) - (1 if hooks and getattr(hooks[-1], "retains_grad", False) else 0), hook)
    return RemovableHandle(hooks, hook)


class RemovableHandle:
    """What registering a hook returns: ``handle.remove()`` takes it off its list again (idempotent)."""

    def __init__(self, hooks, hook):
        self._hooks, self._hook = hooks, hook

    def remove(self):
        if self._hook in self._hooks:
            self._hooks.remove(self._hook)


class Function:
    """Base class of ops. Subclasses define static ``forward(ctx, ...)`` and ``backward(ctx, grad)``."""

    name = "function"  # the op's name in messages; set per subclass from the class name
    # per-node defaults, overridden on the instance when used
    _pre_hooks = None   # tensor hooks (register_hook on the output)
    _versions = ()      # (version counter, version at save time, label) per saved input
    _pack_hooks = None  # the (pack, unpack) saved_tensors_hooks in force when the op ran
    _unpack = None      # how saved arrays are read back: the hooks' unpack, or widening (opmath.py)
    _compute = None     # the dtype backward computes in when it differs from the output's (opmath.py)
    _saved = ()         # what save_for_backward kept; None once backward freed it
    _unrecorded = ()    # positions of saved values that are no input's or output's storage (_version_records)
    _next = ()          # one (node, shape, dtype) tuple or None per positional input: see ``next``
    fused = None
    exact_dtype = False  # True for ops whose output dtype is their point (Cast): never re-cast
    # Beyond first order (autograd/higher_order.py, autograd/forward_ad.py), each op defines:
    # ``vjp(ctx, grad) -> input grads``: backward written in Tensor ops (``grad`` and ``ctx.saved_tensors``
    #     are Tensors of the graph), run instead of ``backward`` when ``create_graph=True``;
    # ``jvp(primals, tangents, out, **options) -> tangent of out``: forward mode, in Tensor ops.
    vjp = None
    jvp = None

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if "name" not in cls.__dict__:
            cls.name = _snake(cls.__name__)

    # --- ctx API used inside forward/backward ------------------------------------------------------
    def save_for_backward(self, *arrays):
        """Keep arrays (and numbers, None) for backward. In-place changes to them before backward are
        detected. Under ``saved_tensors_hooks`` each array is packed now and unpacked when read."""
        hooks = self._pack_hooks
        if hooks is not None:  # pack arrays only: numbers and None saved alongside pass through untouched
            pack, self._unpack = hooks
            array = self.xp.ndarray
            self._packed = packed = [isinstance(a, array) for a in arrays]
            self._raw = arrays  # apply() takes the version records from these, then drops them
            arrays = [pack(a) if p else a for a, p in zip(arrays, packed)]
        self._saved = arrays

    @property
    def saved_tensors(self):
        """What ``save_for_backward`` kept, in order. They are backend *arrays* (NumPy/CuPy), as ``forward``
        receives arrays (PyTorch's are Tensors): an op's backward is written in array maths too."""
        if self._saved is None:
            raise AutogradError(
                f"{self.name}: trying to backward through the graph a second time (or to read saved "
                f"tensors after they were freed). Pass retain_graph=True to the first backward() "
                f"if you need to backward twice.")
        unpack = self._unpack
        return self._saved if unpack is None else tuple(unpack(a) if p else a
                                                        for a, p in zip(self._saved, self._packed))

    @property
    def raw_saved_tensors(self):
        """What the node holds for backward, as stored (PyTorch's ``grad_fn._raw_saved_*``): the arrays, or
        what saved-tensor hooks packed them into (checkpointing's handles); None once backward freed them."""
        return self._saved

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

    def __repr__(self):
        return f"<{type(self).__name__}>"  # PyTorch prints <MulBackward0>: here the node *is* Mul's ctx

    # --- apply: the forward pass of the graph ------------------------------------------------------
    @classmethod
    def apply(cls, *args, _extended=None, **kwargs):
        """Run the op: tensors in, a Tensor out, and (when grad is needed) a graph node for backward.

        Positional arguments are the op's inputs (tensors, or numbers used as operands): each gets an
        edge, and ``backward`` returns one gradient per positional argument. Everything else (dims,
        flags, sizes) is passed by keyword and reaches ``forward`` unchanged.

        One explicit check decides the path: with no wrapper or cast in force for this thread (its own
        registrations and the process-wide ones: ``autograd/mode.py``), the op runs right here, with the
        grad mode and saved-tensor hooks in force (``Mode.grad``, ``Mode.pack``); otherwise
        ``extensions.run_forward`` runs the wrappers, which call back in with ``_extended=(grad mode,
        saved-tensor hooks, casts)``: an ``extensions.Casts`` makes the op run at another precision
        (``opmath.py``). Ops never pass ``_extended``.
        """
        if _extended is None:
            m = _mode_get()
            if m.forward or _process.forward:
                return extensions.run_forward(cls, args, kwargs)
            enabled, hooks, casts = m.grad, m.pack, None
        else:
            enabled, hooks, casts = _extended
        ctx = _new(cls)
        device = None
        track = False       # record this op in the graph?
        raw = []            # arguments with tensors unwrapped to their arrays
        needs = []          # needs_input_grad
        edges = []          # per argument: (the input's node, its shape, its dtype), or None
        low = False         # a bfloat16 input? (the op then computes in float32: extensions.bfloat16_casts)
        for a in args:
            if isinstance(a, Tensor):
                d = a.device
                if device is None:
                    device = d
                elif d is not device and d != device:
                    raise DeviceError(f"{cls.name}: tensors on different devices ({device}, {d})")
                data = a.array
                raw.append(data)
                if data.dtype is _BF16:
                    low = True
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
        if low and casts is None and not cls.exact_dtype:
            casts = extensions.bfloat16_casts(raw)
        if casts is not None:   # the op runs at another precision: inputs converted here (no Cast op)
            kept = opmath.convert_inputs(casts, args, raw, be)
        elif hooks is not None and track:   # saves of an op that is not recorded are never read: not packed
            ctx._pack_hooks = hooks
        try:
            out = cls.forward(ctx, *raw, **kwargs)
        except MinigradError:
            raise
        except (ValueError, TypeError, IndexError, ZeroDivisionError, OverflowError) as e:
            raise _op_error(cls.name, args, e) from None
        if ctx.device is not device:  # the op put its result on another device (device transfer)
            device = ctx.device
            be = get_backend(device)
        if type(out) is not be.array_type:   # a NumPy scalar (a 0-d result): saved as itself too
            scalar, out = out, be.asarray(out)
            if ctx._saved and ctx._unpack is None:
                ctx._saved = tuple(out if s is scalar else s for s in ctx._saved)
        if LEGACY_PROMOTION and out.dtype.char == "d" and not cls.exact_dtype:
            out = _undo_legacy_promotion(out, raw)
        computed = out
        if casts is not None:
            out = opmath.round_output(casts, out, be)
        if be.allocator is not None:  # the memory pool: results live in its blocks (backend's storage hook)
            out = be.adopt(out)
        result = _new(Tensor)  # Tensor._make, inlined: this is the hottest path of the framework
        result.array = out
        result.device = device
        result.grad = None
        result._version_counter = VersionCounter()
        if track and out.dtype.kind in _FLOATING:
            result.requires_grad = True
            result.grad_fn = ctx
            ctx._next = tuple(edges)
            if ctx._saved:
                ctx._versions = _version_records(ctx, args, raw, computed, result)
                if casts is not None:
                    opmath.store_saved(ctx, casts, kept, computed, out, hooks, be)
                elif out is not computed or be.allocator is not None:
                    ctx._saved = _stored(ctx, computed, out, be)
        else:
            result.requires_grad = False
            result.grad_fn = None
        return result

    register_prehook = register_prehook  # ``node.register_prehook(hook)``, as PyTorch's grad_fn has

    @property
    def next(self):
        """The node's edges, one per positional input: an ``Edge`` (node, shape, dtype) or None.

        Kept as plain tuples in ``_next`` (what the engine reads: building an ``Edge`` per input cost
        ~0.1 µs per op) and named here, for people reading the graph."""
        return _edges(self._next)


def _stored(ctx, computed, out, be):
    """Saved arrays as kept: the output's storage where the op saved its output, and everything else in
    the memory pool when one is installed (activation memory is counted there too; not what
    saved-tensor hooks packed: that is theirs)."""
    adopt = be.adopt if be.allocator is not None and ctx._unpack is None else None
    array_type = be.array_type
    return tuple(out if s is computed else adopt(s) if adopt is not None and type(s) is array_type else s
                 for s in ctx._saved)


def _edges(raw):
    return tuple(None if e is None else Edge(e) for e in raw)


def _undo_legacy_promotion(out, raw):
    floats = [a.dtype for a in raw if hasattr(a, "dtype") and a.dtype.kind == "f"]
    if floats and np.dtype("float64") not in floats:
        return out.astype(max(floats, key=lambda d: d.itemsize))
    return out


def _version_records(ctx, args, raw, out, result):
    """For each saved array that is an argument's (or the output's) storage: (counter, version at save
    time, argument position, -1 for the output). The engine compares versions before running backward.
    The positions of the other saved arrays (computed in forward) go to ``ctx._unrecorded`` (only when there
    are some: nothing is added to the hot path): ``create_graph`` turns the recorded ones back into tensors
    of the graph (``higher_order.saved_tensors``)."""
    saved = ctx._saved
    if ctx._unpack is not None:  # packed by saved_tensors_hooks: record the originals' versions
        saved, ctx._raw = ctx._raw, None
    records = []
    unrecorded = None
    for s in saved:
        if s is out:
            records.append((result._version_counter, 0, -1))
            continue
        i = 0
        for r in raw:  # raw[i] is args[i] unwrapped
            if r is s and isinstance(args[i], Tensor):
                vc = args[i]._version_counter
                records.append((vc, vc.value, i))
                break
            i += 1
        else:          # computed in forward, or a number: its position among the saved
            if unrecorded is None:
                unrecorded = []
            unrecorded.append(len(records) + len(unrecorded))
    if unrecorded:
        ctx._unrecorded = tuple(unrecorded)
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

    __slots__ = ("tensor_ref", "_pre_hooks", "__weakref__")
    name = "accumulate_grad"
    _next = next = ()   # a leaf: nothing further back

    register_prehook = register_prehook

    def __repr__(self):
        return "<AccumulateGrad>"

    def __init__(self, tensor):
        self.tensor_ref = weakref.ref(tensor)
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
            t.grad = Tensor._make(get_backend(t.device).adopt(grad), t.device)  # into the pool, if on
        else:
            t.grad.array += grad
        hooks = getattr(t, "_post_acc_hooks", None)
        if hooks:
            for hook in hooks:
                hook(t)
