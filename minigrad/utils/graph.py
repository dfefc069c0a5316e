"""Look at the autograd graph: list its nodes in topological order and draw it with matplotlib.

Used by lecture 01 to show the graph a Python function built (dynamic graphs: a new one each call).
"""
from ..autograd.engine import topological_order
from ..autograd.function import AccumulateGrad


def _label(node, names):
    if isinstance(node, AccumulateGrad):
        t = node.tensor_ref()
        name = names.get(id(t)) if t is not None else None
        shape = tuple(t.shape) if t is not None else ()
        return f"{name or 'leaf'}\n{shape}"
    return type(node).__name__


def trace(output, names=None):
    """(nodes, edges, labels) of the graph behind ``output``: nodes in the engine's order (output first),
    edges as (consumer_index, input_index) pairs. ``names`` maps leaf tensors to labels: {"w": w}."""
    if output.grad_fn is None:
        raise ValueError("trace: the tensor has no grad_fn (was it computed with requires_grad inputs?)")
    names = {id(t): n for n, t in (names or {}).items()}
    nodes = topological_order([output.grad_fn])
    index = {n: i for i, n in enumerate(nodes)}
    edges = [(index[n], index[e[0]]) for n in nodes for e in n.next if e is not None]
    return nodes, edges, [_label(n, names) for n in nodes]


def draw_graph(output, names=None, ax=None, path=None):
    """Draw the graph: the output at the top, leaves at the bottom, arrows in the forward direction."""
    import matplotlib
    if path is not None and ax is None:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    nodes, edges, labels = trace(output, names)
    depth = [0] * len(nodes)
    for consumer, producer in sorted(edges):  # nodes come in topological order, consumers first
        depth[producer] = max(depth[producer], depth[consumer] + 1)
    levels = {}
    for i, d in enumerate(depth):
        levels.setdefault(d, []).append(i)
    pos = {}
    for d, members in levels.items():
        for k, i in enumerate(members):
            pos[i] = ((k + 1) / (len(members) + 1), -d)
    if ax is None:
        fig, ax = plt.subplots(figsize=(max(4, 1.6 * max(len(m) for m in levels.values())),
                                        1.1 * (len(levels) + 1)))
    for consumer, producer in edges:
        (x0, y0), (x1, y1) = pos[producer], pos[consumer]
        ax.annotate("", xy=(x1, y1 - 0.18), xytext=(x0, y0 + 0.18),
                    arrowprops=dict(arrowstyle="->", color="0.4"))
    for i, (x, y) in pos.items():
        leaf = isinstance(nodes[i], AccumulateGrad)
        ax.text(x, y, labels[i], ha="center", va="center", fontsize=9,
                bbox=dict(boxstyle="round", fc="#dbe9f6" if leaf else "#fde2c8", ec="0.3"))
    ax.set_xlim(0, 1)
    ax.set_ylim(-max(depth) - 0.6, 0.6)
    ax.axis("off")
    if path is not None:
        ax.figure.savefig(path, bbox_inches="tight", dpi=110)
    return ax
