"""Forward-mode automatic differentiation, with PyTorch's names (``torch.autograd.forward_ad``)::

    import minigrad.autograd.forward_ad as fwAD
    with fwAD.dual_level():
        x = fwAD.make_dual(primal, tangent)       # a dual tensor: x + tangent * eps, eps**2 = 0
        y = f(x)
        jvp = fwAD.unpack_dual(y).tangent         # J_f(primal) @ tangent, in one forward pass

How: entering ``dual_level`` registers, for this thread only, a forward wrapper at ``Function.apply``'s one
extension point (``extensions.forward_wrappers``). For each op whose arguments carry tangents, it runs the
op, then the op's JVP rule ``jvp(primals, tangents, out, **options)`` (a staticmethod beside its forward
and backward, written in minigrad ops), and attaches the result to the output. An op with no rule raises
``ForwardADError`` naming it. The rule's own ops run through the same wrapper, but on tangent-free
tensors, so they pass straight through; they are recorded by reverse mode as usual, which makes
forward-over-reverse (and reverse-over-forward) work. Leaving the level drops every tangent: a tangent is
kept on its tensor with the level's number and read only while that level is the one in force.

Per thread: a level entered in one thread is invisible to another. Nested levels are refused, as in
PyTorch today.
"""
import collections
import contextvars
import itertools

from ..backend.dtypes import FLOAT_KINDS
from ..errors import AutogradError
from . import extensions, function

UnpackedDualTensor = collections.namedtuple("UnpackedDualTensor", ["primal", "tangent"])

_levels = itertools.count()
_current = contextvars.ContextVar("minigrad.forward_ad.level", default=None)


class ForwardADError(AutogradError):
    """Forward mode can't go through an op (no JVP rule) or was used outside a ``dual_level``."""


class dual_level:
    """Context manager: a level of forward AD for this thread; returns the level's number."""

    def __enter__(self):
        if _current.get() is not None:
            raise ForwardADError("dual_level: nested forward AD levels are not supported (as in PyTorch)")
        self.level = next(_levels)
        self._token = _current.set(self.level)
        self._handle = extensions.forward_wrappers.add(_forward_ad, "forward_ad")
        return self.level

    def __exit__(self, *exc):
        self._handle.remove()
        _current.reset(self._token)
        return False


def _level(level, what):
    current = _current.get()
    if current is None:
        raise ForwardADError(f"{what}: no forward AD level is in force (use `with dual_level():`)")
    if level is not None and level != current:
        raise ForwardADError(f"{what}: level {level} is not the level in force ({current})")
    return current


def make_dual(tensor, tangent, *, level=None):
    """``tensor`` with ``tangent`` attached: a new tensor sharing ``tensor``'s storage and graph (gradients
    reach ``tensor``). ``tangent`` must have ``tensor``'s shape and a floating dtype."""
    level = _level(level, "make_dual")
    Tensor = function.Tensor
    if not isinstance(tensor, Tensor) or not isinstance(tangent, Tensor):
        raise ForwardADError("make_dual: expected two tensors (primal, tangent)")
    if tuple(tangent.shape) != tuple(tensor.shape):
        raise ForwardADError(f"make_dual: tangent of shape {tuple(tangent.shape)} for a primal of shape "
                             f"{tuple(tensor.shape)}")
    if tensor.array.dtype.kind not in FLOAT_KINDS or tangent.array.dtype.kind not in FLOAT_KINDS:
        raise ForwardADError(f"make_dual: primal and tangent must be floating point, got {tensor.dtype} and "
                             f"{tangent.dtype}")
    if tangent.device != tensor.device:
        raise ForwardADError(f"make_dual: tangent on {tangent.device}, primal on {tensor.device}")
    dual = alias(tensor)
    dual._fw = (level, tangent if tangent.array.dtype == tensor.array.dtype else tangent.to(tensor.dtype))
    return dual


def unpack_dual(tensor, *, level=None):
    """``(primal, tangent)``: the primal as a tensor without tangent (same storage and graph) and the
    tangent at the level in force, or None (no level in force, or none attached)."""
    current = _current.get()
    level = current if level is None else level
    tangent = _tangent(tensor, level) if current is not None else None
    return UnpackedDualTensor(alias(tensor) if tangent is not None else tensor, tangent)


def alias(t):
    """A new Tensor object for ``t``'s storage, version counter and place in the graph, without tangent."""
    out = function.Tensor._make(t.array, t.device, t.requires_grad)
    out.grad_fn = t.grad_fn
    out._version_counter = t._version_counter
    if t.requires_grad and t.grad_fn is None:
        out._acc = t._accumulator()       # a leaf: gradients reach the leaf's own node
    return out


def _tangent(a, level):
    fw = getattr(a, "_fw", None)
    return fw[1] if fw is not None and fw[0] == level else None


def _forward_ad(op, args, kwargs, run):
    """The forward wrapper of a level: the op, then its JVP rule when an argument carries a tangent."""
    level = _current.get()
    Tensor = function.Tensor
    tangents = [_tangent(a, level) if isinstance(a, Tensor) else None for a in args]
    if level is None or all(t is None for t in tangents):
        return run()
    out = run()
    if out.array.dtype.kind not in FLOAT_KINDS:
        return out
    if op.jvp is None:
        raise ForwardADError(f"{op.name}: this op has no forward-mode rule (jvp), so forward AD can't go "
                             f"through it")
    primals = [alias(a) if t is not None else a for a, t in zip(args, tangents)]
    tangent = op.jvp(primals, tangents, out, **kwargs)
    if tangent is not None:
        if tuple(tangent.shape) != tuple(out.shape):
            tangent = tangent.expand(*out.shape)
        if tangent.array.dtype != out.array.dtype:
            tangent = tangent.to(out.dtype)
        out._fw = (level, tangent)
    if out.grad_fn is not None:   # for create_graph's sweep: its saved inputs and output get these back
        out.grad_fn._fw_tangents = (level, tangents, tangent)   # (higher_order.saved_tensors)
    return out


def saved_tangent(node, index):
    """The tangent (at the level in force) of ``node``'s input ``index`` (-1: its output) when the node was
    recorded inside that level, else None: forward-over-reverse differentiates backward's formulas."""
    fw = getattr(node, "_fw_tangents", None)
    if fw is None or fw[0] != _current.get():
        return None
    return fw[2] if index < 0 else fw[1][index]
