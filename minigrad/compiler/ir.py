"""The IR: a graph is a list of nodes in execution order, like ``torch.fx``.

This is the compiler's public structure: the passes (``passes.py``, ``fusion/``), ``explain``, the a7
assignment and ONNX export build on exactly what this docstring lists, and nothing else.

``Graph``: ``nodes`` (in execution order, placeholders first), ``output`` (the returned tree: nested
tuples/lists/dicts whose leaves are Nodes or constants), ``name``; ``placeholders`` (in input order),
``calls()`` (the call nodes), ``users()`` (Node -> its readers, and ``"output"``), ``op_counts()``,
``len(graph)`` (the number of calls), ``copy()``, ``print_readable()``, ``draw()``, and ``compile()`` /
``graph(inputs)`` to run it (``code``: the generated source).

``Node``: ``kind`` and ``target`` (table), ``args``/``kwargs`` (the op's inputs and options: nested
tuples/lists/dicts whose leaves are Nodes, a value of the graph, or plain Python values), ``inputs()`` (the
Nodes among them, in order), ``name`` (a Python identifier unique in its graph), ``op_name`` (``mul``,
``linear``, ``greater``, ``fused_elementwise``) and ``meta``: ``shape``, ``dtype`` (a NumPy dtype),
``device``, ``requires_grad``, ``where`` (``'model.py:12 in forward'``), ``grad`` (the grad mode it ran
under), ``mutates`` (it changes an input in place: batch norm's running statistics); passes add ``constant``
(a folded value) and ``fused`` (the op names of a fused chain). A call that returns a tuple (``max(dim)``,
a scan) has no tensor meta of its own: ``operator.getitem`` call_function nodes take its elements.

=================  =========================================================  ==========================
kind               target                                                     replay
=================  =========================================================  ==========================
``placeholder``    index of the tensor among the compiled function's inputs   ``inputs[i]``
``get_attr``       a tensor the code read but did not compute (a parameter,   the same tensor object, so
                   a buffer) or a constant a pass computed                    updated weights are seen
``call_op``        a ``Function`` class (its name: ``target.name``)           ``op.apply(*args, **kw)``
``call_function``  a core function that makes tensors outside                 ``fn(*args, **kw)``
                   ``Function.apply`` (``mg.arange``, ``x > 0``, ``detach``)
=================  =========================================================  ==========================

``Graph.compile()`` turns the graph into Python source, one line per node, and ``exec``s it: replaying is a
straight-line function with no per-node interpretation, and ``del`` statements free each value after its
last use, so a replay holds no more memory than the eager run did.
"""
import collections
import functools
import inspect
import keyword
import math
import re

import numpy as np

from ..autograd.grad_mode import set_grad_enabled
from . import draw as _draw

_LITERALS = (bool, int, str, type(None))


class Node:
    __slots__ = ("kind", "target", "args", "kwargs", "name", "meta")

    def __init__(self, kind, target, args=(), kwargs=None, name="v", meta=None):
        self.kind, self.target, self.args = kind, target, tuple(args)
        self.kwargs = dict(kwargs or {})
        self.name = name
        self.meta = dict(meta or {})

    @property
    def op_name(self):
        """The op's name as it reads in messages (``mul``, ``linear``, ``greater``)."""
        if self.kind == "call_op":
            return self.target.name
        if self.kind == "call_function":
            return getattr(self.target, "__name__", type(self.target).__name__).strip("_") or "call"
        return self.kind

    def inputs(self):
        """The nodes this node reads, in order (duplicates kept)."""
        return [a for a in flatten((self.args, self.kwargs)) if isinstance(a, Node)]

    def describe(self):
        """'f32[4, 8]' (plus the device when not cpu), or '?' for a node without a tensor value."""
        m = self.meta
        if "shape" not in m:
            return "?"
        dt = np.dtype(m["dtype"])
        dev = m.get("device")
        tail = f" {dev}" if dev is not None and str(dev) != "cpu" else ""
        return f"{dt.kind}{dt.itemsize * 8}{list(m['shape'])}{tail}"   # f32, i64, b8

    def __repr__(self):
        return f"%{self.name}"


def is_random(node):
    """True for a node that draws random numbers (dropout, ``mg.randn``): it takes a ``generator``. Such a
    node is never folded, merged or removed: that would change the random stream against eager mode."""
    if node.kind not in ("call_op", "call_function") or "generator" in node.kwargs:
        return "generator" in node.kwargs
    if hasattr(node.target, "draws_random"):   # a scan: whether its body draws
        return node.target.draws_random
    return "generator" in _parameters(node.target.forward if node.kind == "call_op" else node.target)


@functools.lru_cache(maxsize=None)
def _parameters(fn):
    try:
        return frozenset(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return frozenset()


def flatten(tree):
    """Leaves of nested tuples/lists/dicts, left to right."""
    if isinstance(tree, (tuple, list)):
        return [leaf for item in tree for leaf in flatten(item)]
    if isinstance(tree, dict):
        return [leaf for item in tree.values() for leaf in flatten(item)]
    return [tree]


def map_tree(fn, tree):
    """``tree`` with every leaf replaced by ``fn(leaf)`` (tuples stay tuples, lists lists, dicts dicts)."""
    if isinstance(tree, tuple) and not hasattr(tree, "_fields"):
        return tuple(map_tree(fn, x) for x in tree)
    if isinstance(tree, list):
        return [map_tree(fn, x) for x in tree]
    if isinstance(tree, dict):
        return {k: map_tree(fn, v) for k, v in tree.items()}
    return fn(tree)


class Graph:
    """Nodes in execution order plus an output tree whose leaves are Nodes or constants."""

    def __init__(self, nodes=None, output=None, name="graph"):
        self.nodes = list(nodes or [])
        self.output = output
        self.name = name
        self.grad = None     # the grad mode the graph is replayed under (the guard's); see _codegen
        self.passes = {}     # what the graph passes removed: {'constant folding': 2, 'cse': 1, 'dce': 3}
        self._fn = None
        self.code = None

    # --- queries ---------------------------------------------------------------------------------
    @property
    def placeholders(self):
        return [n for n in self.nodes if n.kind == "placeholder"]

    def calls(self):
        return [n for n in self.nodes if n.kind in ("call_op", "call_function")]

    def users(self):
        """Node -> the nodes that read it (and ``"output"`` when the graph returns it)."""
        users = {n: [] for n in self.nodes}
        for n in self.nodes:
            for a in n.inputs():
                if n not in users[a]:
                    users[a].append(n)
        for a in flatten(self.output):
            if isinstance(a, Node):
                users[a].append("output")
        return users

    def op_counts(self):
        """Counter of op names over the call nodes (``{'linear': 2, 'gelu': 1}``)."""
        return collections.Counter(n.op_name for n in self.calls())

    def __len__(self):
        return len(self.calls())

    def copy(self, name=None):
        """A graph of new Node objects with the same kinds, targets, arguments, names and meta."""
        copies = {}

        def ref(a):
            return copies.get(a, a) if isinstance(a, Node) else a
        for n in self.nodes:
            args, kwargs = map_tree(ref, (n.args, n.kwargs))
            copies[n] = Node(n.kind, n.target, args, kwargs, name=n.name, meta=n.meta)
        g = Graph(copies.values(), map_tree(ref, self.output), name or self.name)
        g.grad, g.passes = self.grad, dict(self.passes)
        return g

    # --- printing and drawing --------------------------------------------------------------------
    def print_readable(self, print_output=True):
        """One line per node, in the style of ``torch.fx.GraphModule.print_readable``; returns the text."""
        ins = ", ".join(f"{n.name}: {n.describe()}" for n in self.placeholders)
        lines = [f"{self.name}({ins}):"]
        for n in self.nodes:
            if n.kind == "placeholder":
                continue
            if n.kind == "get_attr":
                rhs = "constant" if n.meta.get("constant") or not n.meta.get("requires_grad") else "parameter"
            else:
                args = [render(a, _short) for a in n.args] + [f"{k}={render(v, _short)}" for k, v in n.kwargs.items()]
                rhs = f"{n.op_name}({', '.join(args)})"
            line = f"    {n.name}: {n.describe()} = {rhs}"
            where = n.meta.get("where")
            lines.append(f"{line:<72} # {where}" if where else line)
        lines.append(f"    return {render(self.output, _short)}")
        text = "\n".join(lines)
        if print_output:
            print(text)
        return text

    def __str__(self):
        return self.print_readable(print_output=False)

    def draw(self, path=None, ax=None):
        """A picture of the graph: a graphviz.Digraph when graphviz is installed (written to ``path`` if
        given), else a matplotlib Axes (see ``draw.py``)."""
        return _draw.draw(self, path=path, ax=ax)

    # --- replay ----------------------------------------------------------------------------------
    def compile(self):
        """Generate and ``exec`` the straight-line replay function; returns it (``fn(inputs) -> output``)."""
        if self._fn is None:
            self.code, env = _codegen(self)
            exec(compile(self.code, f"<minigrad graph {self.name}>", "exec"), env)
            self._fn = env["forward"]
        return self._fn

    def __call__(self, inputs):
        return (self._fn or self.compile())(inputs)


def subgraph(nodes, outputs, name, scalars=None):
    """``nodes`` (in order) copied into a Graph returning ``outputs``. A node outside them that they read
    becomes a placeholder (a ``get_attr`` stays one), and so does each positional argument ``scalars``
    names (node -> arg indices: numbers that vary between calls). Returns the graph and ``sources``: what
    each placeholder stands for, an outside node or a (node, arg index)."""
    inside, copies, head, body, sources = set(nodes), {}, [], [], []
    taken = dict.fromkeys((n.name for n in nodes), 0)

    def outside(a):
        if a not in copies:
            kind, target = ("get_attr", a.target) if a.kind == "get_attr" else ("placeholder", len(sources))
            copies[a] = Node(kind, target, name=a.name, meta=a.meta)
            if kind == "placeholder":
                sources.append(a)
            taken.setdefault(a.name, 0)
            head.append(copies[a])
        return copies[a]

    for n in nodes:
        args, kwargs = map_tree(lambda a: (copies[a] if a in inside else outside(a)) if isinstance(a, Node) else a,
                                (n.args, n.kwargs))
        args = list(args)
        for i in sorted((scalars or {}).get(n, ())):
            dtype = np.dtype(np.float64 if type(n.args[i]) is float else np.int64)
            args[i] = Node("placeholder", len(sources), name=unique_name(f"{n.name}_arg{i}", taken),
                           meta={"shape": (), "dtype": dtype})
            sources.append((n, i))
            head.append(args[i])
        copies[n] = Node(n.kind, n.target, args, kwargs, name=n.name, meta=n.meta)
        body.append(copies[n])
    return Graph(head + body, tuple(copies[a] for a in outputs), name), sources


def render(a, const):
    """Python source for an argument: Nodes by name, containers and literals as written, anything else
    through ``const`` (the generated code binds it as a global; ``print_readable`` shows it short)."""
    if isinstance(a, Node):
        return a.name
    if isinstance(a, tuple) and not hasattr(a, "_fields"):
        return "(" + "".join(render(x, const) + ", " for x in a) + ")"
    if isinstance(a, list):
        return "[" + ", ".join(render(x, const) for x in a) + "]"
    if isinstance(a, dict) and all(isinstance(k, str) for k in a):
        return "{" + ", ".join(f"{k!r}: {render(v, const)}" for k, v in a.items()) + "}"
    if type(a) in _LITERALS or (type(a) is float and math.isfinite(a)):
        return repr(a)
    if a is Ellipsis:
        return "..."
    if type(a) is slice:
        return f"slice({render(a.start, const)}, {render(a.stop, const)}, {render(a.step, const)})"
    return const(a)


def _short(a):
    if isinstance(a, np.ndarray):
        return f"array{list(a.shape)}"
    if hasattr(a, "label"):   # a fused kernel, a scan's body: by its label
        return a.label
    text = repr(a)
    return text if len(text) <= 40 else text[:37] + "..."


def unique_name(base, taken):
    """A Python identifier from ``base`` not yet in ``taken`` (a dict: name -> the last suffix used with it,
    so that the hundredth ``matmul`` costs no more than the first); adds it there."""
    name = re.sub(r"\W", "_", base).strip("_").lower() or "v"
    if name[0].isdigit() or keyword.iskeyword(name):
        name = "v_" + name
    i = taken.get(name)
    if i is None:
        taken[name] = 0
        return name
    candidate = name
    while candidate in taken:
        i += 1
        candidate = f"{name}_{i}"
    taken[name], taken[candidate] = i, 0
    return candidate


def _in_grad_mode(mode, fn, *args, **kwargs):   # an op traced under another grad mode (``mg.no_grad()``)
    with set_grad_enabled(mode):
        return fn(*args, **kwargs)


def _codegen(graph):
    """Python source of ``forward(inputs)`` for ``graph`` and the globals it needs."""
    env, consts = {}, {}

    def const(value):
        key = id(value)
        if key not in consts:
            consts[key] = f"_k{len(consts)}"
            env[consts[key]] = value
        return consts[key]

    last_use = {}
    for i, n in enumerate(graph.nodes):
        for a in n.inputs():
            last_use[a] = i
    returned = {a for a in flatten(graph.output) if isinstance(a, Node)}
    dying = collections.defaultdict(list)
    for node, i in last_use.items():
        if node not in returned:
            dying[i].append(node.name)
    lines = ["def forward(inputs):"]
    for i, n in enumerate(graph.nodes):
        if n.kind == "placeholder":
            rhs = f"inputs[{n.target}]"
        elif n.kind == "get_attr":
            rhs = const(n.target)
        else:
            fn = const(n.target) + (".apply" if n.kind == "call_op" else "")   # looked up per call: never stale
            args = [render(a, const) for a in n.args] + [f"{k}={render(v, const)}" for k, v in n.kwargs.items()]
            mode = n.meta.get("grad")
            if graph.grad is not None and mode is not None and mode != graph.grad:
                args, fn = [repr(bool(mode)), fn] + args, const(_in_grad_mode)
            rhs = f"{fn}({', '.join(args)})"
        where = n.meta.get("where")
        lines.append(f"    {n.name} = {rhs}" + (f"  # {where}" if where else ""))
        if dying.get(i):
            lines.append(f"    del {', '.join(dying[i])}")
    lines.append(f"    return {render(graph.output, const)}")
    return "\n".join(lines) + "\n", env
