"""``Graph.draw``: graphviz when the ``graphviz`` package and its ``dot`` program are installed, otherwise a
layered matplotlib picture (each node at the column of its longest path from the inputs). Reads only the
graph's public structure (``ir.py``), so it needs no import of it.

Colours: inputs green, parameters/constants grey, ops blue, fused kernels orange.
"""
import shutil

_COLORS = {"placeholder": "#b7e1b0", "get_attr": "#dddddd", "call_op": "#bcd4f0", "call_function": "#d9c8f0",
           "fused": "#f7c58b"}


def _color(n):
    return _COLORS["fused"] if "fused" in n.meta else _COLORS[n.kind]


def _label(n):
    op = n.op_name if n.kind.startswith("call") else n.kind
    return f"{n.name}\n{op}\n{n.describe()}" if op != n.name else f"{n.name}\n{n.describe()}"


def draw(graph, path=None, ax=None):
    """Returns a graphviz.Digraph (written to ``path`` if given) or a matplotlib Axes."""
    if ax is None:
        try:
            import graphviz
            if shutil.which("dot") is None:
                raise ImportError
        except ImportError:
            graphviz = None
        if graphviz is not None:
            return _graphviz(graphviz, graph, path)
    return _matplotlib(graph, path, ax)


def _graphviz(graphviz, graph, path):
    dot = graphviz.Digraph(graph.name, node_attr={"shape": "box", "style": "filled,rounded", "fontsize": "10"})
    for n in graph.nodes:
        dot.node(n.name, _label(n), fillcolor=_color(n))
        for a in dict.fromkeys(n.inputs()):
            dot.edge(a.name, n.name)
    dot.node("output", "output", shape="oval")
    for n, readers in graph.users().items():
        if "output" in readers:
            dot.edge(n.name, "output")
    if path:
        dot.render(path.rsplit(".", 1)[0], format=path.rsplit(".", 1)[-1] if "." in path else "png", cleanup=True)
    return dot


def _matplotlib(graph, path, ax):
    import matplotlib.pyplot as plt
    depth = {}
    for n in graph.nodes:
        depth[n] = 1 + max((depth[a] for a in n.inputs() if a in depth), default=-1)
    columns = {}
    for n in graph.nodes:
        columns.setdefault(depth[n], []).append(n)
    pos = {n: (d, -i) for d, col in columns.items() for i, n in enumerate(col)}
    if ax is None:
        width = max(4, 1.9 * (len(columns) or 1))
        height = max(2, 1.1 * max((len(c) for c in columns.values()), default=1))
        _, ax = plt.subplots(figsize=(min(width, 24), min(height, 16)))
    for n in graph.nodes:
        for a in dict.fromkeys(n.inputs()):
            (x0, y0), (x1, y1) = pos[a], pos[n]
            ax.annotate("", xy=(x1 - 0.3, y1), xytext=(x0 + 0.3, y0),
                        arrowprops=dict(arrowstyle="->", color="#555555", lw=0.8))
    for n, (x, y) in pos.items():
        ax.text(x, y, _label(n), ha="center", va="center", fontsize=7,
                bbox=dict(boxstyle="round,pad=0.3", fc=_color(n), ec="#333333", lw=0.6))
    ax.set_xlim(-0.6, max(columns, default=0) + 0.6)
    ax.set_ylim(-max((len(c) for c in columns.values()), default=1) + 0.4, 0.6)
    ax.set_axis_off()
    ax.set_title(f"{graph.name}: {len(graph)} ops")
    if path:
        ax.figure.savefig(path, bbox_inches="tight", dpi=120)
    return ax

