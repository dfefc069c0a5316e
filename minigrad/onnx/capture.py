"""The one place that reads minigrad's graph-capture IR (``minigrad/compiler/``) for the ONNX exporter.

``capture(model, inputs)`` traces ``model(*inputs)`` with ``mg.compile(..., fullgraph=True, fuse=False)``
(the highest-level capture there is) and turns the traced ``Graph`` into a plain ``Captured`` record that
the converters read: graph inputs, constants (parameters and everything computed from them alone, folded
here by running the op once), the op calls in order, and the outputs. If the IR changes, only this file
changes.

Shapes are those of the example inputs (static), as a trace records them (``reshape`` keeps the traced
shape), like ``torch.onnx.export`` without ``dynamic_axes``.
"""
from dataclasses import dataclass, field

from ..autograd.grad_mode import no_grad
from ..errors import ArgumentError
from ..tensor import Tensor


class CaptureError(ArgumentError):
    """The model's forward could not be captured as one graph."""


@dataclass(frozen=True)
class Ref:
    """A value of the graph, by name."""
    name: str


@dataclass
class OpCall:
    op: str               # minigrad's op name: 'linear', 'conv2d', 'getitem', ...
    args: tuple           # leaves: Ref or plain Python values
    kwargs: dict
    out: str
    shape: tuple
    dtype: object         # numpy dtype of the result
    where: str = ""       # the source line that made it


@dataclass
class Captured:
    inputs: list = field(default_factory=list)     # (name, shape, numpy dtype)
    consts: dict = field(default_factory=dict)     # name -> numpy array
    ops: list = field(default_factory=list)        # OpCall, in execution order
    outputs: list = field(default_factory=list)    # names
    dtypes: dict = field(default_factory=dict)     # name -> numpy dtype of every value
    shapes: dict = field(default_factory=dict)     # name -> shape of every value


def capture(model, inputs):
    """Trace ``model(*inputs)`` (eval mode is the caller's business) into a Captured graph."""
    from ..compiler import GraphBreakError, compile as mg_compile
    from ..compiler.ir import flatten, map_tree
    compiled = mg_compile(model, fullgraph=True, fuse=False)
    try:
        with no_grad():
            compiled(*inputs)
    except GraphBreakError as e:
        raise CaptureError(f"onnx.export: the forward cannot be captured as one graph ({e}); ONNX needs a "
                           f"graph without Python reads of tensor values") from None
    graph = compiled.graphs()[0]
    cap = Captured()
    values = {}                                    # Node -> Ref, or ('const', tensor)
    for node in graph.nodes:
        meta = node.meta
        if node.kind == "placeholder":
            cap.inputs.append((node.name, tuple(meta["shape"]), meta["dtype"]))
            cap.dtypes[node.name], cap.shapes[node.name] = meta["dtype"], tuple(meta["shape"])
            values[node] = Ref(node.name)
        elif node.kind == "get_attr":
            values[node] = ("const", node.target)
        elif all(isinstance(values[a], tuple) for a in node.inputs()):
            values[node] = ("const", _run(node, map_tree(lambda a: values[a][1] if hasattr(a, "kind") else a,
                                                        (node.args, node.kwargs))))
        else:
            args, kwargs = map_tree(lambda a: _leaf(a, values, cap), (node.args, node.kwargs))
            cap.ops.append(OpCall(node.op_name, args, kwargs, node.name, tuple(meta.get("shape", ())),
                                  meta.get("dtype"), meta.get("where", "")))
            cap.dtypes[node.name], cap.shapes[node.name] = meta.get("dtype"), tuple(meta.get("shape", ()))
            values[node] = Ref(node.name)
    for i, out in enumerate(flatten(graph.output)):
        if not hasattr(out, "kind"):
            raise CaptureError(f"onnx.export: output {i} is not a tensor computed by the model ({out!r})")
        cap.outputs.append(_leaf(out, values, cap).name)
    return cap


def _leaf(a, values, cap):
    """A node argument as a Ref (constants become named initializers) or a plain value."""
    if not hasattr(a, "kind"):
        return a
    v = values[a]
    if isinstance(v, Ref):
        return v
    name = f"{a.name}_const" if a.kind != "get_attr" else a.name
    if name not in cap.consts:
        t = v[1]
        cap.consts[name] = (t.detach().cpu().numpy() if isinstance(t, Tensor) else t).copy()
        cap.dtypes[name], cap.shapes[name] = cap.consts[name].dtype, cap.consts[name].shape
    return Ref(name)


def _run(node, tree):
    """Fold a node whose inputs are all constants: run it once."""
    args, kwargs = tree
    with no_grad():
        fn = node.target.apply if node.kind == "call_op" else node.target
        return fn(*args, **kwargs)
