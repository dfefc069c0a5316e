"""minigrad.utils.graph: the drawing lecture 01 uses must show every edge (reuse is the lesson) and
lay the graph out without crossings where one exists."""
import itertools

import matplotlib
import numpy as np
import pytest

import minigrad as mg
from matplotlib.patches import FancyArrowPatch
from minigrad.utils.graph import draw_graph, layout, trace

matplotlib.use("Agg")


def cube_sum():
    x = mg.tensor([-1.0, -1.0], requires_grad=True)
    y = x * 2
    return (y * y * y).sum(), {"x": x, "y": y}


def lecture_section2():
    a = mg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = mg.tensor([0.5, -1.0, 2.0], requires_grad=True)
    return (a * b + a.exp()).sum(), {"a": a, "b": b}


def _crosses(p, q, r, s):
    """Do the segments pq and rs cross at a point that is not an end of both?"""
    def orient(a, b, c):
        return np.sign((b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0]))
    if {p, q} & {r, s}:
        return False                                     # edges meeting at a shared node do not cross
    return orient(p, q, r) * orient(p, q, s) < 0 and orient(r, s, p) * orient(r, s, q) < 0


def crossings(routes):
    segs = [(k, a, b) for k, route in enumerate(routes) for a, b in zip(route, route[1:])]
    return sum(_crosses(a, b, c, d) for (i, a, b), (j, c, d) in itertools.combinations(segs, 2) if i != j)


def arrows(ax):
    """Each arrow's shaft (its path up to the arrowhead's MOVETO), in display coordinates."""
    out = []
    for p in ax.patches:
        if isinstance(p, FancyArrowPatch):
            path = p.get_path()                          # data coordinates: the shaft, then the head
            head = np.flatnonzero(path.codes == path.MOVETO)[1]
            out.append(ax.transData.transform(path.vertices[:head]))
    return out


def test_trace_lists_one_edge_per_use():
    out, names = cube_sum()
    nodes, edges, labels = trace(out, names)
    assert [type(n).__name__ for n in nodes] == ["Sum", "Mul", "Mul", "Mul", "AccumulateGrad"]
    assert labels[3] == "Mul\n= y" and labels[4] == "x\n(2,)"
    # Sum<-Mul3, Mul3<-Mul2 and Mul3<-y, Mul2<-y twice, y<-x
    assert sorted(edges) == [(0, 1), (1, 2), (1, 3), (2, 3), (2, 3), (3, 4)]


def test_every_edge_gets_its_own_arrow():
    out, names = cube_sum()
    _, edges, _ = trace(out, names)
    ax = draw_graph(out, names)
    paths = arrows(ax)
    assert len(paths) == len(edges)
    # reused inputs: y feeds y * y twice; the two arrows are bent apart (> 10 px at their middles)
    twins = [k for k, e in enumerate(edges) if e == (2, 3)]
    a, b = (paths[k] for k in twins)
    assert np.linalg.norm(a[len(a) // 2] - b[len(b) // 2]) > 10
    for p, q in itertools.combinations(paths, 2):        # no two arrows drawn on top of each other
        assert len(p) != len(q) or np.abs(p - q).max() > 5


def test_long_edges_go_around_the_nodes_between():
    out, names = cube_sum()
    ax = draw_graph(out, names)
    nodes, edges, labels, pos, routes = layout(out, names)
    boxes = [t.get_bbox_patch().get_window_extent() for t in ax.texts]
    centres = [ax.transData.transform(pos[i]) for i in range(len(nodes))]
    for k, path in enumerate(arrows(ax)):
        ends = set(edges[k])
        for i, box in enumerate(boxes):
            owner = min(range(len(nodes)), key=lambda n: np.linalg.norm(centres[n] - box.get_points().mean(0)))
            if owner in ends:
                continue
            assert not any(box.contains(x, y) for x, y in path), f"edge {edges[k]} runs through {labels[owner]!r}"


def test_section2_graph_has_no_crossings():
    out, names = lecture_section2()
    nodes, edges, labels, pos, routes = layout(out, names)
    assert crossings(routes) == 0
    a, b = labels.index("a\n(3,)"), labels.index("b\n(3,)")
    assert pos[a][0] < pos[b][0]                         # a feeds Exp and Mul, b only Mul: a goes left


def test_crossing_counter_sees_a_crossing():
    assert crossings([[(0, 0), (1, 1)], [(1, 0), (0, 1)]]) == 1
    assert crossings([[(0, 0), (0, 1)], [(0, 0), (1, 1)]]) == 0


def test_trace_needs_a_graph():
    with pytest.raises(ValueError, match="no grad_fn"):
        trace(mg.tensor([1.0]))


def test_draw_to_file(tmp_path):
    out, names = lecture_section2()
    draw_graph(out, names, path=tmp_path / "g.png")
    assert (tmp_path / "g.png").stat().st_size > 1000
