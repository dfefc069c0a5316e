"""The plan of piecewise replay: a trace with graph breaks cut into *pieces*, each compiled as one graph.

A function with graph breaks needs Python to decide what happens after each break, so on later calls its
Python runs again (``replay.py``) while the tensors come from compiled graphs. A **piece** is a run of
recorded ops that Python calls back to back, with nothing in between that needs a value: pieces end at
every graph break (a host read: ``.item()``, ``bool(t)``, ``print(t)``), at every ``call_function`` node
(``x > 0``, ``mg.arange``, ``mg.randn``: Python runs those itself, so their inputs must be real and their
results come from Python) and where grad mode changes. A piece's graph returns only the values that leave
it: those read by later pieces or by ``call_function`` nodes, the tensors host reads look at, and the
function's result. Everything else may stay inside a fused kernel; Python is handed a stand-in for it.

A float or int that an op took as an operand (``y * s`` with ``s = t.item()``) is a constant of the trace;
when Python passes another value, that operand becomes an input of the piece's graph (the piece is
rebuilt once), as Dynamo recompiles a specialised float as a dynamic one.

A trace whose Python cannot run again without doubling an effect is not replayed piecewise (``why_not``):
in-place changes of tensors from outside a segment (running statistics, ``add_`` on an input) — a deopt
re-runs recorded ops — and opaque library calls, whose inner ops Python would call again.
"""
import numpy as np

from ..random import default_generator
from .fusion import fuse
from .ir import Graph, Node, flatten, map_tree, unique_name

_NUMBER = (int, float)


class Piece:
    """A run of ``call_op`` nodes compiled as one graph (``graph``; ``build`` says how it was made)."""

    def __init__(self, nodes, index):
        self.nodes, self.index = nodes, index
        self.pos = {n: i for i, n in enumerate(nodes)}
        self.grad = nodes[0].meta["grad"]
        self.outputs = []        # nodes whose values leave the piece, in piece order
        self.out_index = {}      # node -> index in the graph's output tuple
        self.graph = self.build = None
        self.generators = [n.kwargs.get("generator") or default_generator
                           for n in nodes if "generator" in n.kwargs]   # dropout draws: snapshot their state

    @property
    def last(self):
        return self.nodes[-1]


class Build:
    """One build of a piece: what its placeholders are bound to (``sources``: an outside node, or (node,
    arg index) for a number operand) and its unfused ops, which ``eager()`` re-runs for a stand-in whose
    value the fused graph never made (a piece is rebuilt when an operand becomes dynamic)."""

    def __init__(self, head, body, sources, name):
        self.head, self.body, self.sources, self.name = head, body, sources, name
        self._eager = None

    def eager(self):
        if self._eager is None:
            self._eager = Graph(self.head + self.body, tuple(self.body), name=f"{self.name}_eager")
            self._eager.compile()
        return self._eager


class Plan:
    """Pieces of a trace with graph breaks; ``why_not`` says why it must run eagerly instead (or None)."""

    def __init__(self, tracer, fuse_graphs=True, block=None):
        self.fuse, self.block = fuse_graphs, block
        self.why_not = "; ".join(dict.fromkeys(tracer.unsafe)) or None
        self.placeholders = [n for n in tracer.nodes if n.kind == "placeholder"]
        self.ops = [n for n in tracer.nodes if n.kind == "call_op"]
        self.dynamic = {}        # node -> positional args taken from Python on every call
        self.pieces, self.piece_of = [], {}
        cur = []
        for n in tracer.nodes:
            if n.kind == "call_function" or (n.kind == "call_op" and cur and (
                    n.meta["segment"] != cur[0].meta["segment"] or n.meta["grad"] != cur[0].meta["grad"])):
                self._close(cur)
                cur = []
            if n.kind == "call_op":
                cur.append(n)
        self._close(cur)
        leaving = {a for n in tracer.nodes for a in n.inputs() if self.piece_of.get(a) is not None
                   and self.piece_of.get(a) is not self.piece_of.get(n)}
        leaving.update(tracer.observed)
        leaving.update(a for a in flatten(map_tree(tracer._known, tracer.output)) if a is not None)
        for p in self.pieces:
            p.outputs = [n for n in p.nodes if n in leaving]
            p.out_index = {n: i for i, n in enumerate(p.outputs)}
            if self.why_not is None:
                self.build(p)

    def _close(self, nodes):
        if nodes:
            piece = Piece(nodes, len(self.pieces))
            self.pieces.append(piece)
            for n in nodes:
                self.piece_of[n] = piece

    def make_dynamic(self, node, index):
        """Take positional arg ``index`` of ``node`` from Python on every call; rebuilds its piece."""
        self.dynamic.setdefault(node, set()).add(index)
        self.build(self.piece_of[node])

    def build(self, piece):
        """(Re)make ``piece.graph``: placeholders for what comes from outside, the ops, fused, compiled."""
        copies, head, sources = {}, [], []
        taken = {n.name for n in piece.nodes}

        def outside(a):
            if a not in copies:
                if a.kind == "get_attr":
                    copies[a] = Node("get_attr", a.target, name=a.name, meta=a.meta)
                else:
                    copies[a] = Node("placeholder", len(sources), name=a.name, meta=a.meta)
                    sources.append(a)
                taken.add(a.name)
                head.append(copies[a])
            return copies[a]

        body = []
        for n in piece.nodes:
            args, kwargs = map_tree(lambda a: (copies[a] if a in piece.pos else outside(a))
                                    if isinstance(a, Node) else a, (n.args, n.kwargs))
            args = list(args)
            for i in sorted(self.dynamic.get(n, ())):
                scalar = Node("placeholder", len(sources), name=unique_name(f"{n.name}_arg{i}", taken),
                              meta={"shape": (), "dtype": np.dtype(np.float64 if type(n.args[i]) is float
                                                                   else np.int64)})
                sources.append((n, i))
                head.append(scalar)
                args[i] = scalar
            copies[n] = Node(n.kind, n.target, args, kwargs, name=n.name, meta=n.meta)
            body.append(copies[n])
        graph = Graph(head + body, tuple(copies[n] for n in piece.outputs), name=f"piece_{piece.index}")
        if self.fuse:
            graph = fuse(graph, self.block)
        graph.compile()
        piece.graph, piece.build = graph, Build(head, body, sources, graph.name)

    def graphs(self):
        return [p.graph for p in self.pieces]


def can_vary(expected, actual):
    """A number operand whose value may change between calls (same type; bools are flags, not numbers)."""
    return type(expected) in _NUMBER and type(actual) is type(expected)
