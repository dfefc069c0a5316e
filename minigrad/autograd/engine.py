"""The backward engine: topological order, then one sweep from the outputs to the leaves.

1. ``topological_order`` walks the graph (iteratively: no recursion limit) and returns the nodes so that
   every node comes after all nodes that consume its output.
2. The sweep pops each node's summed gradient, calls its ``backward`` and hands each input its share,
   un-broadcast to the input's shape. Leaves (AccumulateGrad nodes) add it into ``tensor.grad``.
"""
import contextlib
import math
import threading
import weakref

from ..backend.dtypes import FLOAT_KINDS
from ..errors import AutogradError, GradientError, InplaceModificationError
from . import extensions, function, higher_order, mode as _mode, opmath
from .function import LEGACY_PROMOTION, AccumulateGrad


class _Local(threading.local):
    callbacks = None  # list while a backward runs: functions to call when it ends (DDP waits here)


_local = _Local()


def topological_order(roots, stop=None):
    """Nodes reachable from ``roots``, each before the nodes it depends on (reverse DFS post-order).
    ``stop``: nodes listed but not walked past (``GraphCtx.partials``: a subgraph's own inputs)."""
    order, visited = [], set()
    for root in roots:
        if root in visited:
            continue
        visited.add(root)
        stack = [(root, iter(root._next))]
        while stack:
            node, edges = stack[-1]
            for edge in edges:
                if edge is None:
                    continue
                child = edge[0]  # the Edge's node (edges are kept as plain tuples: Function.next)
                if child not in visited:
                    visited.add(child)
                    stack.append((child, iter(child._next if stop is None or child not in stop else ())))
                    break
            else:
                stack.pop()
                order.append(node)
    order.reverse()
    return order


def unbroadcast(grad, shape, node, index):
    """Sum ``grad`` down to ``shape`` (the inverse of broadcasting). The one place this is done."""
    if grad.ndim < len(shape) or (grad.ndim == len(shape) and grad.size < math.prod(shape)):
        _bad_grad(node, index, grad, shape)
    lead = grad.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape)
                                      if n == 1 and grad.shape[lead + i] != 1)
    if axes:
        grad = grad.sum(axis=axes, keepdims=True)
    if lead:
        grad = grad.reshape(grad.shape[lead:])
    if grad.shape != tuple(shape):
        _bad_grad(node, index, grad, shape)
    return grad


def _bad_grad(node, index, grad, shape):
    raise GradientError(f"{node.name}: backward returned a gradient of shape {tuple(grad.shape)} for "
                        f"input {index} of shape {tuple(shape)}")


def _check_versions(node):
    for counter, version, index in node._versions:
        if counter.value != version:
            label = "its output" if index < 0 else f"input {index}"
            raise InplaceModificationError(
                f"{node.name}: one of the arrays needed for its backward ({label}) was modified by an "
                f"in-place operation (version {counter.value}, expected {version}). Use an out-of-place op "
                f"(x = x + y instead of x += y), or clone() the tensor before modifying it.")


def run_backward(roots, retain_graph=False, capture=None):
    """Propagate ``roots`` [(node, grad_array)] to the leaves: the loop lecture 01 shows.

    ``capture``: dict {node: None}; when given, gradients reaching those nodes are stored there instead of
    being accumulated into leaves (this is ``mg.autograd.grad``).
    """
    m = _mode.get()
    wrapped = m.backward or _mode.process.backward  # backward wrappers in force (checked once per pass)
    with _backward_pass():
        pending = {}                                # node -> the gradient summed there so far
        shared = _Shared()                          # arrays handed to more than one input
        for node, g in roots:
            pending[node] = pending[node] + g if node in pending else g
        for node in topological_order([n for n, _ in roots]):
            grad = pending.pop(node, None)
            if grad is None:
                continue                            # no gradient flows through this node
            if node._pre_hooks:
                grad = _run_hooks(node, grad)       # register_hook / retain_grad
            if capture is not None and node in capture:
                capture[node] = grad
            if type(node) is AccumulateGrad:        # a leaf: into tensor.grad (not for autograd.grad)
                if capture is None:
                    node.accumulate(grad, shared.has(grad))
                continue
            if node._versions:
                _check_versions(node)               # arrays it saved modified in place since forward?
            if wrapped:                             # inside the profiler's, the pool's... wrappers
                input_grads = extensions.call_backward(node, grad)
            elif node._compute is None:
                input_grads = node.backward(node, grad)
            else:                                   # it ran at another precision (autocast: opmath.py)
                input_grads = node.backward(node, opmath.widen(node, grad))
            if not retain_graph:
                node._saved = None                  # free what forward saved
            if type(input_grads) is not tuple:
                input_grads = (input_grads,)
            if len(input_grads) != len(node._next):
                _bad_count(node, input_grads)
            previous = None
            for i, edge in enumerate(node._next):    # hand each input its share, summed where they meet
                g = input_grads[i]
                if edge is None or g is None:
                    continue
                child, shape, dtype = edge
                if g.shape != shape or g.dtype is not dtype:
                    g = _conform(g, shape, dtype, grad, node, i)   # un-broadcast, check the dtype
                if g is previous or (i > 1 and any(g is x for x in input_grads[:i])):
                    shared.add(g)
                previous = g
                waiting = pending.get(child)
                pending[child] = g if waiting is None else waiting + g
            input_grads = waiting = None            # freed now, not after the next node's backward


def _bad_count(node, input_grads):
    raise GradientError(f"{node.name}: backward returned {len(input_grads)} gradients for "
                        f"{len(node._next)} inputs")


class _Shared:
    """Gradient arrays handed to more than one input (``Add`` returns ``(g, g)``): a leaf must copy such an
    array before keeping it as ``.grad``, or a later ``+=`` would leak into the other input.

    It maps ``id`` to a weak reference, so a new array that reuses a dead one's id is not mistaken for it
    (that made copies, and so memory use, depend on where Python happened to put objects).
    """

    def __init__(self):
        self.refs = {}

    def add(self, g):
        try:
            self.refs[id(g)] = weakref.ref(g)
        except TypeError:                   # an array type without weak references: by id alone
            self.refs[id(g)] = None

    def has(self, g):
        if id(g) not in self.refs:
            return False
        ref = self.refs[id(g)]
        return ref is None or ref() is g


@contextlib.contextmanager
def _backward_pass():
    """The outermost backward collects ``queue_callback`` functions and runs them when it ends."""
    if _local.callbacks is not None:  # a backward inside a backward (a hook, checkpointing)
        yield
        return
    _local.callbacks = []
    try:
        yield
        for fn in _local.callbacks:
            fn()
    finally:
        _local.callbacks = None


def _conform(ig, shape, dtype, g, node, i):
    """Un-broadcast a gradient to its input's shape, and check (or legitimately cast) its dtype."""
    if ig.shape != shape:
        ig = unbroadcast(ig, shape, node, i)
    if ig.dtype != dtype:
        # a float gradient of the output's dtype is legitimate type promotion (float32 * float64 input),
        # and so is one of the dtype the node computed in (autocast: opmath.py); NumPy 1.x also promotes
        # float32 0-d arrays with Python floats. Cast those back.
        floats = ig.dtype.kind in FLOAT_KINDS and dtype.kind in FLOAT_KINDS    # FLOAT_KINDS: bfloat16 too
        if floats and (ig.dtype == g.dtype or ig.dtype == node._compute or (
                LEGACY_PROMOTION and ig.dtype.itemsize > dtype.itemsize)):
            return opmath.convert(node.device.backend, ig, dtype)  # in the device's storage (the pool)
        raise GradientError(f"{node.name}: backward returned a {ig.dtype} gradient for input {i} of "
                            f"dtype {dtype}")
    return ig


def _run_hooks(node, g):
    Tensor = function.Tensor
    dev = node.tensor_ref().device if type(node) is AccumulateGrad else node.device
    for hook in node._pre_hooks:
        out = hook(Tensor._make(g, dev))
        if out is not None:
            new = out.array if isinstance(out, Tensor) else out
            if new.shape != g.shape or new.dtype != g.dtype:
                raise GradientError(f"{node.name}: a tensor hook returned a gradient of shape "
                                    f"{tuple(new.shape)} ({new.dtype}) for one of shape {tuple(g.shape)} "
                                    f"({g.dtype})")
            g = new
    return g


def queue_callback(fn):
    """Run ``fn()`` when the current (outermost) backward pass finishes; DDP waits for buckets here."""
    if _local.callbacks is None:
        raise AutogradError("queue_callback: no backward pass is running")
    _local.callbacks.append(fn)


def _roots(tensors, grad_tensors, what, create_graph=False):
    Tensor = function.Tensor
    if isinstance(tensors, Tensor):
        tensors = (tensors,)
    if grad_tensors is None or isinstance(grad_tensors, Tensor):
        grad_tensors = (grad_tensors,) * len(tensors) if grad_tensors is None else (grad_tensors,)
    if len(grad_tensors) != len(tensors):
        raise AutogradError(f"{what}: got {len(tensors)} tensors but {len(grad_tensors)} gradients")
    roots = []
    for t, g in zip(tensors, grad_tensors):
        if not t.requires_grad:
            raise AutogradError(f"{what}: tensor of shape {tuple(t.shape)} does not require grad and has "
                                f"no grad_fn (did you compute it under no_grad, or forget requires_grad=True?)")
        if g is None:
            if t.array.size != 1:
                raise AutogradError(f"{what}: grad can be implicitly created only for scalar outputs; "
                                    f"got shape {tuple(t.shape)}. Pass gradient= (a tensor of that shape)")
            g = t.device.xp.ones_like(t.array)
        else:
            garr = g.array if isinstance(g, Tensor) else t.device.backend.asarray(g)
            if tuple(garr.shape) != tuple(t.shape):
                raise AutogradError(f"{what}: gradient of shape {tuple(garr.shape)} does not match the "
                                    f"tensor's shape {tuple(t.shape)}")
            if create_graph:   # the given tensor itself: its own graph is kept (PyTorch's grad_outputs)
                g = g if isinstance(g, Tensor) else Tensor._make(garr, t.device)
                g = g if garr.dtype == t.array.dtype else g.to(t.dtype)
            else:
                g = garr.astype(t.array.dtype, copy=True)
        if create_graph and not isinstance(g, Tensor):
            g = Tensor._make(g, t.device)
        roots.append((t.grad_fn or t._accumulator(), g))
    return roots


def _sweep(roots, retain_graph, create_graph, capture=None):
    if create_graph:
        with _backward_pass():
            higher_order.Sweep(topological_order, _run_graph_hooks, _check_versions).run(roots, retain_graph, capture)
    else:
        run_backward(roots, retain_graph, capture)


def _run_graph_hooks(node, g):
    for hook in node._pre_hooks:
        out = hook(g)
        if out is not None:
            if tuple(out.shape) != tuple(g.shape):
                raise GradientError(f"{node.name}: a tensor hook returned a gradient of shape "
                                    f"{tuple(out.shape)} for one of shape {tuple(g.shape)}")
            g = out
    return g


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate d(tensors)/d(leaf) into every leaf's ``.grad`` (``Tensor.backward`` calls this).

    ``create_graph=True``: the gradients are themselves differentiable (each ``.grad`` has a ``grad_fn``);
    ``retain_graph`` defaults to ``create_graph``, as in PyTorch. ``inputs``: accumulate into these leaves
    only (a tensor or a sequence of tensors)."""
    if retain_graph is None:
        retain_graph = create_graph
    roots = _roots(tensors, grad_tensors, "backward", create_graph)
    if inputs is None:
        _sweep(roots, retain_graph, create_graph)
        return
    Tensor = function.Tensor
    inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    nodes = [_input_node(t, "backward") for t in inputs]
    capture = {n: None for n in nodes}
    _sweep(roots, retain_graph, create_graph, capture)
    for t, n in zip(inputs, nodes):
        g = capture[n]
        if g is not None:
            g = g if isinstance(g, Tensor) else Tensor._make(g.copy(), t.device)
            t.grad = g if t.grad is None else (t.grad + g if create_graph else _add_into(t.grad, g))


def _add_into(acc, g):
    acc.array += g.array
    return acc


def _input_node(t, what):
    if not t.requires_grad:
        raise AutogradError(f"{what}: one of the inputs does not require grad")
    return t.grad_fn or t._accumulator()


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=None,
         materialize_grads=False):
    """d(outputs)/d(inputs) as a tuple, one per input, without touching any ``.grad`` (``torch.autograd.grad``).

    ``create_graph=True`` makes the results differentiable (gradients of gradients); ``retain_graph``
    defaults to ``create_graph``. An input that does not reach the outputs raises unless
    ``allow_unused=True`` (then its gradient is None, or zeros with ``materialize_grads=True``)."""
    Tensor = function.Tensor
    if retain_graph is None:
        retain_graph = create_graph
    if allow_unused is None:
        allow_unused = materialize_grads
    inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    nodes = [_input_node(t, "grad") for t in inputs]
    capture = {n: None for n in nodes}
    _sweep(_roots(outputs, grad_outputs, "grad", create_graph), retain_graph, create_graph, capture)
    result = []
    for t, n in zip(inputs, nodes):
        g = capture[n]
        if g is None:
            if not allow_unused:
                raise AutogradError("grad: one of the inputs was not used to compute the outputs "
                                    "(pass allow_unused=True to get None for it)")
            if materialize_grads:
                g = t.device.xp.zeros_like(t.array)
        if g is not None and not isinstance(g, Tensor):
            g = Tensor._make(g, t.device)
        result.append(g)
    return tuple(result)
