"""The elementwise-fusion pass: find maximal chains of elementwise ops, replace each by one kernel.

A *chain* is a connected set of fusible nodes (ops of ``table.RULES`` with floating-point results) with one
exit: every node but the last is read only by nodes of the same chain and is not returned by the graph, so
no intermediate value has to exist in memory. Chains grow backwards from their last node: walking the graph
from its end, a fusible node joins the chain of its readers when they all belong to one chain; otherwise it
starts a chain of its own. A reduction, a matmul or any other op is never fusible, so a chain stops at it
(its result may still *feed* a chain: ``x - x.mean()`` fuses the subtraction that follows the mean).

    graph = fuse(graph)          # a new Graph; the input graph is not changed
    fused_kernels(graph)         # the FusedKernel objects, with their generated sources

On the CPU a kernel runs block by block on a few threads: ``blocked.BLOCK`` elements per block and
``blocked.THREADS`` threads (module-level settings; see blocked.py for the memory this costs).
"""
from ..ir import Node, unique_name
from .kernel import FusedElementwise, FusedKernel, Step
from .table import RULES, _lit, operands_and_attrs

MIN_OPS = 2   # a single op gains nothing from fusion


def fusible(node):
    dtype = node.meta.get("dtype")
    return (node.kind == "call_op" and node.target in RULES and dtype is not None and dtype.kind == "f"
            and operands_and_attrs(node) is not None)


def find_chains(graph):
    """Lists of nodes (in graph order), each a maximal fusible chain of at least ``MIN_OPS`` ops."""
    users = graph.users()
    chain_of, chains = {}, []
    for node in reversed(graph.nodes):
        if not fusible(node):
            continue
        readers = users[node]
        owners = {id(chain_of.get(u)) if u != "output" and u in chain_of else None for u in readers}
        if readers and None not in owners and len(owners) == 1:
            chain = chain_of[readers[0]]
            chain.insert(0, node)
        else:
            chain = [node]
            chains.append(chain)
        chain_of[node] = chain
    order = {n: i for i, n in enumerate(graph.nodes)}
    return [sorted(c, key=order.get) for c in chains if len(c) >= MIN_OPS]


def make_kernel(chain, name, block=None):
    """The FusedKernel of ``chain`` and the chain's external input nodes, in first-use order."""
    inside = {n: k for k, n in enumerate(chain)}
    inputs, steps = [], []
    for node in chain:
        ops, attrs = operands_and_attrs(node)
        refs = []
        for o in ops:
            if isinstance(o, Node) and o in inside:
                refs.append(("v", inside[o]))
            elif isinstance(o, Node):
                if o not in inputs:
                    inputs.append(o)
                refs.append(("in", inputs.index(o)))
            else:
                refs.append(("lit", _lit(o)))
        steps.append(Step(RULES[node.target], refs, tuple(attrs), node.meta["dtype"], node.op_name))
    kernel = FusedKernel(name, steps, [n.meta["dtype"] for n in inputs], block)
    return kernel, inputs


def fuse(graph, block=None):
    """A copy of ``graph`` in which every chain is one ``fused_elementwise`` node."""
    g = graph.copy()
    taken, dead = dict.fromkeys((n.name for n in g.nodes), 0), set()
    for chain in find_chains(g):
        ops = [n.op_name for n in chain]
        name = unique_name("fused_" + "_".join(list(dict.fromkeys(ops))[:4]), taken)
        kernel, inputs = make_kernel(chain, name, block)
        sink = chain[-1]
        sink.target, sink.args, sink.kwargs, sink.name = FusedElementwise, tuple(inputs), {"kernel": kernel}, name
        sink.meta = dict(sink.meta, fused=ops)
        dead.update(chain[:-1])
    g.nodes = [n for n in g.nodes if n not in dead]
    return g


def fused_kernels(graph):
    return [n.kwargs["kernel"] for n in graph.nodes if n.target is FusedElementwise]


__all__ = ["FusedElementwise", "FusedKernel", "find_chains", "fuse", "fused_kernels", "fusible", "make_kernel"]
