"""``mg.compile.scan``: a loop that a graph can hold.

    carry, ys = scan(fn, init, xs)   # for x in xs: carry, y = fn(carry, x); ys = the y's stacked

Run eagerly, it is that Python loop. Traced by ``mg.compile``, the loop is one node: the body ``fn`` is
traced once, on the first element, into a graph of its own (optimised, fused, compiled), and the node runs
that graph once per element of ``xs``, as ``jax.lax.scan`` and ``torch._higher_order_ops.scan`` do. A
Python ``for`` over the same body is unrolled by tracing instead: one copy of the body's ops per step, so
the graph, the trace and the generated code grow with the length, and every new length is a new graph
(lecture 08 measures both).

``init``/``carry`` and each ``y`` are tensors. The body must trace to one graph (a graph break in it is an
error). It may read parameters and globals, but a tensor the traced function computed before the loop must
come in through ``init`` or ``xs``: the body's graph would freeze its value. Gradients flow through the
loop as through eager code: each step's ops run through ``op.apply``.
"""
from ..ops import stack
from .capture import Tracer, active
from .ir import is_random
from .passes import lower
from .replay import Call


class ScanBody:
    """A scan node's target: the compiled body of one traced ``scan``; calling it runs the loop."""
    __name__ = "scan"

    def __init__(self, fn, graph):
        self.fn, self.graph = fn, graph
        self.label = f"<body: {len(graph)} ops>"
        self.draws_random = any(is_random(n) for n in graph.nodes)

    def __call__(self, init, xs, first=None):
        carry, ys = (init, []) if first is None else (first[0], [first[1]])
        for i in range(len(ys), xs.shape[0]):
            carry, y = self.graph([carry, xs[i]])
            ys.append(y)
        return carry, stack(ys)


def scan(fn, init, xs):
    """``carry, ys`` of ``for x in xs: carry, y = fn(carry, x)``; one graph node when traced (see above)."""
    capture = active.get()
    if isinstance(capture, Tracer) and not capture.depth:
        return _trace(capture, fn, init, xs)
    if isinstance(capture, Call):   # piecewise replay: the scan node runs its body, or the call deopts
        node = capture.expected()
        body = node.target if node is not None and getattr(node.target, "fn", None) is fn else None
        if body is not None:
            return capture.on_call(body, (init, xs), {}, lambda: body(init, xs))
        return capture.on_call(scan, (fn, init, xs), {}, lambda: _loop(fn, init, xs))
    return _loop(fn, init, xs)


def _loop(fn, init, xs):
    carry, ys = init, []
    for i in range(xs.shape[0]):
        carry, y = fn(carry, xs[i])
        ys.append(y)
    return carry, stack(ys)


def _trace(tracer, fn, init, xs):
    x0 = tracer.quietly(xs.__getitem__, 0)
    inner = Tracer(fullgraph=True, outer=tracer)
    first = inner.run(fn, (init, x0), {})
    body = ScanBody(fn, lower(inner.full_graph(), inner.grad_enabled))
    out = tracer.quietly(body, init, xs, first)
    tracer.record_call(body, (init, xs), {}, out)
    return out
