"""The plan of piecewise replay: a trace with graph breaks cut into *pieces*, each compiled as one graph.

A function with graph breaks needs Python to decide what happens after each break, so on later calls its
Python runs again (``replay.py``) while the tensors come from compiled graphs. The plan lists the calls
Python is expected to make (``steps``: the trace's call nodes, in order) and sorts them in two:

* **Python runs it** (``python_runs``): a ``call_function`` node (``x > 0``, ``mg.arange``, ``mg.randn``)
  and an op with a non-floating result (an index, a mask): replay runs the call as Python makes it and
  keeps the real result. Library code checks such values on the host (``cross_entropy``'s targets).
* **pieces**: runs of the other ops that Python calls back to back, ending at every graph break, every
  node Python runs and every change of grad mode. A piece's graph returns only the values that leave it
  (read by later pieces or by nodes Python runs, looked at by host reads, or returned); everything else may
  stay inside a fused kernel, and Python is handed a stand-in for it.

A float or int that an op took as an operand (``y * s`` with ``s = t.item()``) is a constant of the trace;
when Python passes another value, that operand becomes an input of the piece's graph (the piece is rebuilt
once), as Dynamo recompiles a specialised float as a dynamic one.

A trace whose Python cannot run again without doubling an effect (``why_not``: an in-place change of a
tensor from outside its segment, an op changing an input) runs eagerly instead: a deopt re-runs ops.
"""
import operator

from ..random import default_generator
from .ir import flatten, map_tree, subgraph
from .passes import lower

_NUMBER = (int, float)


class Piece:
    """A run of ``call_op`` nodes compiled as one graph (``graph``, made by ``Plan.build``)."""

    def __init__(self, nodes, index):
        self.nodes, self.index = nodes, index
        self.pos = {n: i for i, n in enumerate(nodes)}
        self.grad = nodes[0].meta["grad"]
        self.outputs = []        # nodes whose values leave the piece, in piece order
        self.out_index = {}      # node -> index in the graph's output tuple
        self.graph = self.unfused = self.sources = None
        self.generators = [n.kwargs.get("generator") or default_generator
                           for n in nodes if "generator" in n.kwargs]   # dropout draws: snapshot their state

    @property
    def last(self):
        return self.nodes[-1]


class Plan:
    """Pieces of a trace with graph breaks; ``why_not`` says why it must run eagerly instead (or None)."""

    def __init__(self, tracer, fuse=True, optimize=True, block=None):
        self.fuse, self.optimize, self.block = fuse, optimize, block
        self.why_not = "; ".join(dict.fromkeys(tracer.unsafe)) or None
        self.placeholders = [n for n in tracer.nodes if n.kind == "placeholder"]
        self.transparent = tracer.transparent
        self.children = {}       # a call returning a tuple -> its getitem nodes
        for n in tracer.nodes:
            if n.target is operator.getitem and n.kind == "call_function":
                self.children.setdefault(n.args[0], []).append(n)
        self.steps = [n for n in tracer.nodes if n.kind == "call_op" or
                      (n.kind == "call_function" and n.target is not operator.getitem)]
        self.python_runs = {n for n in self.steps if n.kind == "call_function" or n.meta["dtype"].kind != "f"}
        self.dynamic = {}        # node -> positional args taken from Python on every call
        self.pieces, self.piece_of = [], {}
        cur = []
        for n in self.steps:
            if n in self.python_runs or (cur and (n.meta["segment"] != cur[0].meta["segment"] or
                                                  n.meta["grad"] != cur[0].meta["grad"])):
                self._close(cur)
                cur = []
            if n not in self.python_runs:
                cur.append(n)
        self._close(cur)
        leaving = {a for n in tracer.nodes for a in n.inputs() if self.piece_of.get(a) is not None
                   and self.piece_of.get(a) is not self.piece_of.get(n)}
        leaving.update(tracer.observed)
        leaving.update(a for a in flatten(map_tree(tracer.known, tracer.output)) if a is not None)
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
        """(Re)make ``piece.graph``: placeholders for what comes from outside, the ops, lowered. ``sources``
        says what each placeholder is bound to; ``unfused`` is kept to recompute a fused-away value."""
        piece.unfused, piece.sources = subgraph(piece.nodes, piece.outputs, f"piece_{piece.index}", self.dynamic)
        piece.graph = lower(piece.unfused, piece.grad, self.fuse, self.optimize, self.block)

    def graphs(self):
        return [p.graph for p in self.pieces]


def can_vary(expected, actual):
    """A number operand whose value may change between calls (same type; bools are flags, not numbers)."""
    return type(expected) in _NUMBER and type(actual) is type(expected)
