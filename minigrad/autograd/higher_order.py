"""Gradients of gradients: the backward sweep of ``create_graph=True``.

The first-order sweep (``engine.run_backward``) moves backend arrays through each op's ``backward``: it
builds nothing, and stays as fast as it was. With ``create_graph=True`` the same sweep runs here on
*Tensors*: each node's ``vjp(ctx, grad)`` is its backward written in minigrad ops, so every gradient it
returns is itself a node of a new graph, and can be differentiated again (Hessian-vector products,
gradient penalties, MAML, Newton's method).

What a ``vjp`` reads: ``grad`` (a Tensor, possibly of the graph: the output gradient of an outer
``autograd.grad``), the op's options (``ctx.dim``...) and ``ctx.saved_tensors``, given back as Tensors
*of the graph*: a saved array that was an input of the op is that input again (its ``grad_fn``, or its
leaf's accumulator), the saved output is the output again (``grad_fn`` = this very node, as PyTorch's
saved outputs are). A saved array computed inside ``forward`` (a mask, an index) is a constant there;
ops whose second derivative needs more save their inputs. Every op of the library defines ``vjp``; one
that does not gets a clear error naming it (``DoubleBackwardError``).

The rest of the sweep is the first-order one (topological order, hooks, un-broadcasting, dtype checks,
in-place checks, accumulation), with Tensor arithmetic instead of array arithmetic: a leaf's ``.grad`` is
replaced by ``grad + new`` (out of place, so it stays differentiable) instead of ``+=``.
"""
from ..backend.dtypes import FLOAT_KINDS
from ..errors import AutogradError, GradientError
from . import forward_ad, function, grad_mode
from .function import AccumulateGrad, Function


class DoubleBackwardError(AutogradError):
    """An op has no differentiable backward (``vjp``): ``create_graph=True`` can't go through it."""


class GraphCtx:
    """What a ``vjp`` receives as ``ctx``: the node's options and flags as they are (``ctx.dim``,
    ``ctx.needs_input_grad``), its saved arrays as Tensors of the graph (``saved_tensors``), and two helpers
    for ops whose backward is a fused kernel: ``partials`` and ``input_as``."""

    def __init__(self, node, sweep):
        self.node, self.sweep = node, sweep

    def __getattr__(self, name):   # options forward() stored on the node (ctx.dim, ctx.index...)
        return getattr(self.node, name)

    @property
    def saved_tensors(self):
        return saved_tensors(self.node)

    def partials(self, fn, inputs, grad, needs):
        """The vector-Jacobian product of ``fn`` (the op's forward written in minigrad ops) at ``inputs``
        (Tensors of the graph, or other values) with ``grad``, as Tensors of the graph. ``needs``: which
        inputs want a gradient. Each goes through its own ``Alias`` node where the sweep stops, so the result
        is the partial derivative for that argument only (the same tensor passed twice gets two)."""
        Tensor = function.Tensor
        with grad_mode.enable_grad():
            args = [Alias.apply(x) if need and isinstance(x, Tensor) and x.requires_grad else x
                    for x, need in zip(inputs, needs)]
            out = fn(*args)
            capture = {a.grad_fn: None for a, x in zip(args, inputs) if a is not x}
            if out.requires_grad and capture:
                self.sweep.run([(out.grad_fn, grad)], True, capture, stop=True)
        return tuple(capture.get(a.grad_fn) if a is not x else None for a, x in zip(args, inputs))

    def input_as(self, index, value):
        """A Tensor with the values ``value`` (an array, or a broadcast of one) in the place of the op's input
        ``index`` in the graph (what reaches it reaches that input): for ops that saved something computed
        from an input instead of the input, where the derivatives are the same at both (log_softmax's
        output for its logits)."""
        node = self.node
        edge = node._next[index]
        if edge is not None and tuple(value.shape) != tuple(edge[1]):   # a broadcast of the input: undo it
            shape = tuple(edge[1])
            lead = value.ndim - len(shape)
            value = value[(0,) * lead + tuple(slice(0, 1) if n == 1 else slice(None) for n in shape)]
        t = function.Tensor._make(value, node.device)
        if edge is not None:
            t.requires_grad = True
            if type(edge[0]) is AccumulateGrad:
                t._acc = edge[0]
            else:
                t.grad_fn = edge[0]
        return t


class Alias(Function):
    """The identity as a node of its own (``GraphCtx.partials`` marks an op's inputs with it)."""

    @staticmethod
    def forward(ctx, a):
        return a

    @staticmethod
    def backward(ctx, grad):
        return grad

    vjp = backward

    @staticmethod
    def jvp(primals, tangents, out):
        return tangents[0]


def saved_tensors(node):
    """``node``'s saved values, arrays turned into Tensors: an input (output) of the op becomes that input
    (output) again, connected to the graph; other arrays become constants; numbers pass through."""
    saved = node.saved_tensors
    Tensor = function.Tensor
    unrecorded = node._unrecorded   # the others, in order, are the version records' inputs (or output)
    positions = [p for p in range(len(saved)) if p not in unrecorded]
    origin = {position: record[2] for position, record in zip(positions, node._versions)}
    out = []
    for position, s in enumerate(saved):
        if not hasattr(s, "dtype") or not hasattr(s, "shape"):
            out.append(s)
            continue
        t = Tensor._make(s, node.device)
        index = origin.get(position)
        if index is not None and s.dtype.kind in FLOAT_KINDS and forward_ad.saved_tangent(node, index) is not None:
            t._fw = (forward_ad._current.get(), forward_ad.saved_tangent(node, index))
        if index is not None and s.dtype.kind in FLOAT_KINDS:
            source = node if index < 0 else node._next[index][0] if node._next[index] is not None else None
            if source is not None:
                t.requires_grad = True
                if type(source) is AccumulateGrad:
                    t._acc = source          # a leaf's alias: gradients reach the leaf's own node
                else:
                    t.grad_fn = source
        out.append(t)
    return tuple(out)


def graph_vjp(node, grad, sweep):
    """One node's backward on Tensors (with grad mode on, so the result is a graph)."""
    vjp = type(node).vjp
    if vjp is None:
        raise DoubleBackwardError(
            f"{node.name}: this op has no differentiable backward, so create_graph=True (gradients of "
            f"gradients, gradgradcheck, hessian) can't go through it")
    with grad_mode.enable_grad():
        return vjp(GraphCtx(node, sweep), grad)


def as_graph_grad(g, like):
    """A root gradient for ``create_graph``: the given Tensor itself (its graph is kept, as PyTorch's
    ``grad_outputs``), or ones for a scalar output."""
    Tensor = function.Tensor
    if g is None:
        return Tensor._make(like.device.xp.ones_like(like.array), like.device)
    return g if isinstance(g, Tensor) else Tensor._make(like.device.backend.asarray(g), like.device)


def _conform(g, shape, dtype, node, i):
    """Un-broadcast a Tensor gradient to its input's shape and dtype (``engine._conform`` on Tensors)."""
    if tuple(g.shape) != tuple(shape):
        lead = g.ndim - len(shape)
        if lead < 0:
            raise GradientError(f"{node.name}: backward returned a gradient of shape {tuple(g.shape)} for "
                                f"input {i} of shape {tuple(shape)}")
        axes = tuple(range(lead)) + tuple(lead + k for k, n in enumerate(shape)
                                          if n == 1 and g.shape[lead + k] != 1)
        if axes:
            g = g.sum(dim=axes, keepdim=True)
        g = g.reshape(tuple(shape))
    if g.array.dtype != dtype:
        if g.array.dtype.kind not in FLOAT_KINDS or dtype.kind not in FLOAT_KINDS:   # bfloat16 is "V"
            raise GradientError(f"{node.name}: backward returned a {g.array.dtype} gradient for input {i} of "
                                f"dtype {dtype}")
        g = g.to(dtype)
    return g


class Sweep:
    """The backward sweep of ``create_graph=True`` (``engine.run_backward`` on Tensors). The engine hands it
    its own pieces (topological order, tensor hooks, the in-place check), so this module needs no import of
    the engine (which imports it)."""

    def __init__(self, order, run_hooks, check_versions):
        self.order, self.run_hooks, self.check_versions = order, run_hooks, check_versions

    def run(self, roots, retain_graph, capture=None, stop=False):
        """``roots``: (node, grad Tensor) pairs. ``capture``: {node: None}, filled with the gradients reaching
        those nodes instead of accumulating into leaves (``autograd.grad``); ``stop``: they end there."""
        pending = {}
        for node, g in roots:
            pending[node] = pending[node] + g if node in pending else g
        with grad_mode.enable_grad():
            for node in self.order([n for n, _ in roots], capture if stop else None):
                grad = pending.pop(node, None)
                if grad is None:
                    continue
                if node._pre_hooks:
                    grad = self.run_hooks(node, grad)
                if capture is not None and node in capture:
                    capture[node] = grad
                    if stop:
                        continue
                if type(node) is AccumulateGrad:
                    if capture is None:
                        _accumulate(node, grad)
                    continue
                if node._versions:
                    self.check_versions(node)
                input_grads = graph_vjp(node, grad, self)
                if not retain_graph:
                    node._saved = None
                if type(input_grads) is not tuple:
                    input_grads = (input_grads,)
                if len(input_grads) != len(node._next):
                    raise GradientError(f"{node.name}: vjp returned {len(input_grads)} gradients for "
                                        f"{len(node._next)} inputs")
                for i, edge in enumerate(node._next):
                    g = input_grads[i]
                    if edge is None or g is None:
                        continue
                    child, shape, dtype = edge
                    g = _conform(g, shape, dtype, node, i)
                    waiting = pending.get(child)
                    pending[child] = g if waiting is None else waiting + g


def _accumulate(node, grad):
    """A leaf's ``.grad`` with ``create_graph``: kept as the (differentiable) Tensor, or summed out of place."""
    t = node.tensor_ref()
    if t is None:
        return
    t.grad = grad if t.grad is None else t.grad + grad
    for hook in getattr(t, "_post_acc_hooks", None) or ():
        hook(t)

