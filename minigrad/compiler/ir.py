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


class Node:
    __slots__ = ("kind", "target", "args", "kwargs", "name", "meta")

    def __init__(self, kind, target, args=(), kwargs=None, name="v", meta=None):
        self.kind, self.target, self.args, self.kwargs = kind, target, tuple(args), dict(kwargs or {})
        self.name, self.meta = name, dict(meta or {})

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
        dt, dev = np.dtype(m["dtype"]), m.get("device")
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
    if isinstance(tree, (tuple, list, dict)):
        return [leaf for item in (tree.values() if isinstance(tree, dict) else tree) for leaf in flatten(item)]
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
        self.nodes, self.output, self.name = list(nodes or []), output, name
        self.grad = None     # the grad mode the graph is replayed under (the guard's); see _codegen
        self.passes = {}     # the op count after each graph pass: {'traced': 9, 'constant folding': 7, ...}
        self._fn = self.code = None

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
            for a in dict.fromkeys(n.inputs()):
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
        g = subgraph(self.nodes, self.output, name or self.name)[0]
        g.grad, g.passes = self.grad, dict(self.passes)
        return g

    # --- printing and drawing --------------------------------------------------------------------
    def print_readable(self, print_output=True):
        """One line per node, in the style of ``torch.fx.GraphModule.print_readable``; returns the text."""
        lines = [f"{self.name}({', '.join(f'{n.name}: {n.describe()}' for n in self.placeholders)}):"]
        for n in self.nodes:
            if n.kind == "placeholder":
                continue
            if n.kind == "get_attr":
                rhs = "constant" if n.meta.get("constant") or not n.meta.get("requires_grad") else "parameter"
            else:
                rhs = f"{n.op_name}({_arguments(n, _short)})"
            line = f"    {n.name}: {n.describe()} = {rhs}"
            lines.append(f"{line:<72} # {n.meta['where']}" if n.meta.get("where") else line)
        text = "\n".join(lines + [f"    return {render(self.output, _short)}"])
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


def subgraph(nodes, output, name, scalars=None):
    """``nodes`` (in order) copied into a Graph returning ``output`` (a tree of them). A node outside them that
    they read becomes a placeholder (a ``get_attr`` stays one), and so does each positional argument ``scalars``
    names (node -> arg indices: numbers that vary between calls). Returns the graph and ``sources``: what
    each placeholder stands for, an outside node or a (node, arg index)."""
    copies, head, sources = {}, [], []
    taken = dict.fromkeys((n.name for n in nodes), 0)

    def placeholder(name, meta, source):
        sources.append(source)
        head.append(Node("placeholder", len(sources) - 1, name=name, meta=meta))
        return head[-1]

    def copy(a):
        if not isinstance(a, Node):
            return a
        if a not in copies:   # read from outside ``nodes``: a placeholder, or the same get_attr
            taken.setdefault(a.name, 0)
            if a.kind == "get_attr":
                copies[a] = Node("get_attr", a.target, name=a.name, meta=a.meta)
                head.append(copies[a])
            else:
                copies[a] = placeholder(a.name, a.meta, a)
        return copies[a]

    body = []
    for n in nodes:
        args, kwargs = map_tree(copy, (n.args, n.kwargs))
        args = list(args)
        for i in sorted((scalars or {}).get(n, ())):
            dtype = np.dtype(np.float64 if type(n.args[i]) is float else np.int64)
            args[i] = placeholder(unique_name(f"{n.name}_arg{i}", taken), {"shape": (), "dtype": dtype}, (n, i))
        copies[n] = Node(n.kind, n.target, args, kwargs, name=n.name, meta=n.meta)
        body.append(copies[n])
    return Graph(head + body, map_tree(copy, output), name), sources


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
    if type(a) in (bool, int, str, type(None)) or (type(a) is float and math.isfinite(a)):
        return repr(a)
    if a is Ellipsis:
        return "..."
    if type(a) is slice:
        return f"slice({render(a.start, const)}, {render(a.stop, const)}, {render(a.step, const)})"
    return const(a)


def _arguments(node, const):
    return ", ".join([render(a, const) for a in node.args] + [f"{k}={render(v, const)}" for k, v in node.kwargs.items()])


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
    env, names = {}, {}

    def const(value):   # a global of the generated code: _k0, _k1, ...
        name = names.setdefault(id(value), f"_k{len(names)}")
        env[name] = value
        return name

    last_use = {a: i for i, n in enumerate(graph.nodes) for a in n.inputs()}
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
            fn, args = const(n.target) + (".apply" if n.kind == "call_op" else ""), _arguments(n, const)
            mode = n.meta.get("grad")   # (``.apply`` is looked up per call: never stale)
            if graph.grad is not None and mode is not None and mode != graph.grad:
                fn, args = const(_in_grad_mode), f"{bool(mode)!r}, {fn}" + (f", {args}" if args else "")
            rhs = f"{fn}({args})"
        lines.append(f"    {n.name} = {rhs}" + (f"  # {n.meta['where']}" if n.meta.get("where") else ""))
        if dying.get(i):
            lines.append(f"    del {', '.join(dying[i])}")
    lines.append(f"    return {render(graph.output, const)}")
    return "\n".join(lines) + "\n", env
