"""Look at the autograd graph: list its nodes in topological order and draw it with matplotlib.

Used by lecture 01 to show the graph a Python function built (dynamic graphs: a new one each call).
The drawing is a small layered layout (Sugiyama's method, as Graphviz's ``dot`` does it): every node sits
on the level of its longest path from the output, an edge that skips levels is routed through invisible
waypoints on the levels in between (so it never runs through a node), nodes are ordered within their level
by the mean position of their neighbours to remove crossings, and the several edges between one pair of
nodes (``y * y`` uses ``y`` twice) are drawn as separate, bent arrows: reuse is what the lecture teaches,
so it must be visible.
"""
from ..autograd.engine import topological_order
from ..autograd.function import AccumulateGrad


def _label(node, names):
    if isinstance(node, AccumulateGrad):
        t = node.tensor_ref()
        name = names.get(id(t)) if t is not None else None
        shape = tuple(t.shape) if t is not None else ()
        return f"{name or 'leaf'}\n{shape}"
    name = names.get(id(node))
    return type(node).__name__ + (f"\n= {name}" if name else "")


def trace(output, names=None):
    """(nodes, edges, labels) of the graph behind ``output``: nodes in the engine's order (output first),
    edges as (consumer_index, input_index) pairs, one per edge of the graph (an input used twice by one op
    gives two equal pairs). ``names`` labels tensors: {"w": w} names a leaf; a computed tensor's name is
    written under the op that made it ({"y": y} with y = x * 2 labels that Mul "= y")."""
    if output.grad_fn is None:
        raise ValueError("trace: the tensor has no grad_fn (was it computed with requires_grad inputs?)")
    names = {id(t if t.grad_fn is None else t.grad_fn): n for n, t in (names or {}).items()}
    nodes = topological_order([output.grad_fn])
    index = {n: i for i, n in enumerate(nodes)}
    edges = [(index[n], index[e.node]) for n in nodes for e in n.next if e is not None]
    return nodes, edges, [_label(n, names) for n in nodes]


def _crossings(order, chains):
    """Number of pairs of level-to-level segments that cross (their ends swap order between two levels)."""
    rank = {v: (lvl, k) for lvl, vs in order.items() for k, v in enumerate(vs)}
    segs = {}
    for chain in chains:
        for u, v in zip(chain, chain[1:]):
            segs.setdefault(rank[u][0], []).append((rank[u][1], rank[v][1]))
    return sum((a0 - b0) * (a1 - b1) < 0 for ss in segs.values()
               for i, (a0, a1) in enumerate(ss) for b0, b1 in ss[i + 1:])


def layout(output, names=None, sweeps=6):
    """Where ``draw_graph`` puts things: ``(nodes, edges, labels, pos, routes)``.

    ``pos[i] = (x, y)`` of node ``i`` (the output at y = 0, inputs below it, one unit per level);
    ``routes[k]`` is the list of points edge ``k`` of ``edges`` passes through, from the input's node to
    its consumer's (waypoints included, so long edges go around the nodes between them)."""
    nodes, edges, labels = trace(output, names)
    depth = [0] * len(nodes)
    for consumer, producer in sorted(edges):  # nodes come in topological order, consumers first
        depth[producer] = max(depth[producer], depth[consumer] + 1)
    # one vertex per node, plus waypoints ("w<k>.<level>") for edge k on every level it skips
    level = {i: d for i, d in enumerate(depth)}
    chains = []  # per edge: vertices from the consumer (top) down to the producer
    for k, (c, p) in enumerate(edges):
        chain = [c] + [f"w{k}.{d}" for d in range(depth[c] + 1, depth[p])] + [p]
        for d, v in enumerate(chain[1:-1], depth[c] + 1):
            level[v] = d
        chains.append(chain)
    up, down = {v: [] for v in level}, {v: [] for v in level}
    for chain in chains:
        for u, v in zip(chain, chain[1:]):
            down[u].append(v)
            up[v].append(u)
    order = {}
    for v in level:
        order.setdefault(level[v], []).append(v)  # real nodes in engine order, then waypoints
    best, best_x = dict(order), _crossings(order, chains)

    def reorder(lvl, neighbours, ref):
        place = {v: k for k, v in enumerate(order[ref])}
        old = {v: k for k, v in enumerate(order[lvl])}
        key = {v: (sum(place[u] for u in neighbours[v]) / len(neighbours[v]) if neighbours[v] else old[v],
                   old[v]) for v in order[lvl]}
        order[lvl] = sorted(order[lvl], key=key.get)

    levels = sorted(order)
    for sweep in range(sweeps):  # median/barycenter heuristic: down, then up, keeping the best ordering
        for lvl in (levels[1:] if sweep % 2 == 0 else levels[-2::-1]):
            reorder(lvl, up if sweep % 2 == 0 else down, lvl - 1 if sweep % 2 == 0 else lvl + 1)
        x = _crossings(order, chains)
        if x < best_x:
            best, best_x = {k: list(v) for k, v in order.items()}, x
    xy = {v: (k - (len(vs) - 1) / 2, -lvl) for lvl, vs in best.items() for k, v in enumerate(vs)}
    pos = {i: xy[i] for i in range(len(nodes))}
    routes = [[xy[v] for v in reversed(chain)] for chain in chains]  # drawn from the input upwards
    return nodes, edges, labels, pos, routes


def _smooth(points, steps=12):
    """A curve through ``points`` (Catmull-Rom): the polyline's corners rounded off, ends kept."""
    if len(points) == 2:
        return points
    pts = [points[0]] + list(points) + [points[-1]]
    out = [points[0]]
    for i in range(1, len(pts) - 2):
        p0, p1, p2, p3 = pts[i - 1:i + 3]
        for s in range(1, steps + 1):
            t = s / steps
            out.append(tuple(0.5 * (2 * b + (-a + c) * t + (2 * a - 5 * b + 4 * c - d) * t * t
                                    + (-a + 3 * b - 3 * c + d) * t ** 3)
                             for a, b, c, d in zip(p0, p1, p2, p3)))
    return out


def draw_graph(output, names=None, ax=None, path=None):
    """Draw the graph: the output at the top, leaves at the bottom, one arrow per edge in the forward
    direction (an input an op uses twice gets two arrows, bent apart). Returns the axes; each arrow is a
    ``FancyArrowPatch`` in ``ax.patches``, in the order of ``trace``'s edges."""
    import matplotlib
    if path is not None and ax is None:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch
    from matplotlib.path import Path

    nodes, edges, labels, pos, routes = layout(output, names)
    xs = [x for route in routes for x, _ in route] + [x for x, _ in pos.values()]
    depth = -min(y for _, y in pos.values())
    if ax is None:
        width = max(xs) - min(xs) + 1
        fig, ax = plt.subplots(figsize=(max(3.0, 1.5 * width + 0.8), 0.95 * (depth + 1) + 0.3))
    boxes = {}
    for i, (x, y) in pos.items():
        leaf = isinstance(nodes[i], AccumulateGrad)
        boxes[i] = ax.text(x, y, labels[i], ha="center", va="center", fontsize=9, zorder=3,
                           bbox=dict(boxstyle="round", fc="#dbe9f6" if leaf else "#fde2c8", ec="0.3"))
    ax.set_xlim(min(xs) - 0.7, max(xs) + 0.7)
    ax.set_ylim(-depth - 0.55, 0.55)
    ax.axis("off")
    # arrows start and end at the boxes' edges: measure the boxes as drawn (their height is in points)
    ax.figure.canvas.draw()
    to_data = ax.transData.inverted()
    half = {}
    for i, t in boxes.items():
        ext = t.get_bbox_patch().get_window_extent()
        (_, y0), (_, y1) = to_data.transform([(ext.x0, ext.y0), (ext.x1, ext.y1)])
        half[i] = abs(y1 - y0) / 2 + 0.03
    parallel = {}
    for k, e in enumerate(edges):
        parallel.setdefault((e, len(routes[k])), []).append(k)
    for (e, _), ks in parallel.items():
        consumer, producer = e
        for j, k in enumerate(ks):
            (x0, y0), *mid, (x1, y1) = routes[k]
            bend = (j - (len(ks) - 1) / 2) * 0.4  # parallel edges: bent apart, ends spread a little
            start, end = (x0 + bend * 0.3, y0 + half[producer]), (x1 + bend * 0.3, y1 - half[consumer])
            if not mid and bend:  # the middle pushed sideways, perpendicular to the straight arrow
                dx, dy = end[0] - start[0], end[1] - start[1]
                norm = (dx * dx + dy * dy) ** 0.5
                mid = [((start[0] + end[0]) / 2 - bend * dy / norm, (start[1] + end[1]) / 2 + bend * dx / norm)]
            pts = _smooth([start, *mid, end])
            ax.add_patch(FancyArrowPatch(path=Path(pts), arrowstyle="-|>", mutation_scale=10, color="0.35",
                                         lw=1.1, zorder=2))
    if path is not None:
        ax.figure.savefig(path, bbox_inches="tight", dpi=110)
    return ax
