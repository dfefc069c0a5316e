"""Graph passes before fusion: constant folding, common sub-expression elimination, dead-code elimination.

Each pass changes a graph in place and returns it; ``optimize`` runs the three, in this order, on a copy and
notes the number of ops after each in ``graph.passes`` (``explain`` prints it). ``lower`` is what a traced
graph goes through before it replays: ``optimize``, the fusion pass, code generation.

* **Constant folding**: a call whose inputs are all constants (literals, or values folded before) is run
  once, now, and its node becomes a ``get_attr`` holding the result: ``mg.arange(T)``, an attention mask
  ``~mg.ones(L, L, dtype=bool).tril()``. Inputs and parameters are never constants (they change between
  calls), nor is a value the graph returns (the caller could change it in place).
* **CSE**: two calls of the same target on the same inputs with equal options compute the same value; the
  second is removed and its readers read the first (``x.exp()`` written twice).
* **DCE**: a call whose value nothing reads (no node, not the output) is removed; then what only it read.

No pass touches a node that draws random numbers (``ir.is_random``: merging or removing a dropout would
change the draws against eager mode) or that changes an input in place (``meta['mutates']``: batch norm's
running statistics).
"""
from ..autograd.grad_mode import no_grad
from .fusion import fuse
from .ir import Node, flatten, is_random, map_tree


def _pure(node):
    return node.kind in ("call_op", "call_function") and not is_random(node) and not node.meta.get("mutates")


def _outputs(graph):
    return {a for a in flatten(graph.output) if isinstance(a, Node)}


def fold_constants(graph):
    values, returned = {}, _outputs(graph)
    for n in graph.nodes:
        if n.kind == "get_attr" and n.meta.get("constant"):
            values[n] = n.target
        if not _pure(n) or n in returned or any(a not in values for a in n.inputs()):
            continue
        args, kwargs = map_tree(lambda a: values[a] if isinstance(a, Node) else a, (n.args, n.kwargs))
        with no_grad():
            value = (n.target.apply if n.kind == "call_op" else n.target)(*args, **kwargs)
        n.kind, n.target, n.args, n.kwargs = "get_attr", value, (), {}
        n.meta["constant"] = True
        values[n] = value
    return graph


def eliminate_common_subexpressions(graph):
    seen, same, returned, kept = {}, {}, _outputs(graph), []
    for n in graph.nodes:
        if same:
            n.args, n.kwargs = map_tree(lambda a: same.get(a, a) if isinstance(a, Node) else a, (n.args, n.kwargs))
        key = _key(n) if _pure(n) else None
        if key is not None and n not in returned:
            first = seen.setdefault(key, n)
            if first is not n:
                same[n] = first
                continue
        kept.append(n)
    graph.nodes = kept
    return graph


def _key(node):
    """What makes two calls the same computation (None: options that can't be compared by value)."""
    def key(a):
        if isinstance(a, Node):
            return ("node", id(a))
        if isinstance(a, (tuple, list)):
            return (type(a).__name__,) + tuple(key(x) for x in a)
        if isinstance(a, dict):
            return ("dict",) + tuple((k, key(v)) for k, v in sorted(a.items()))
        hash(a)   # arrays and other unhashable options: TypeError
        return (type(a).__name__, a)
    try:
        return (node.kind, id(node.target), node.meta.get("grad"), key(node.args), key(node.kwargs))
    except TypeError:
        return None


def eliminate_dead_code(graph):
    live, kept = _outputs(graph), []
    for n in reversed(graph.nodes):
        if n in live or n.kind == "placeholder" or (n.kind.startswith("call") and not _pure(n)):
            kept.append(n)
            live.update(n.inputs())
    graph.nodes = kept[::-1]
    return graph


PASSES = {"constant folding": fold_constants, "cse": eliminate_common_subexpressions,
          "dce": eliminate_dead_code}


def optimize(graph):
    """A copy of ``graph`` after the passes; ``passes`` maps 'traced' and each pass to the op count after it."""
    g = graph.copy()
    g.passes = {"traced": len(g)}
    for name, run in PASSES.items():
        run(g)
        g.passes[name] = len(g)
    return g


def lower(graph, grad, fuse_graph=True, optimize_graph=True, block=None):
    """The graph that replays: optimised, fused (unless an op ran under another grad mode than ``grad``,
    the guard's: a fused kernel has one), and compiled to Python."""
    g = optimize(graph) if optimize_graph else graph
    if fuse_graph and all(n.meta.get("grad", grad) == grad for n in g.nodes):
        g = fuse(g, block)
    g.grad = grad
    g.compile()
    return g
