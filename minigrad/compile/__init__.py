"""minigrad.compile: graph capture, graph breaks and operator fusion (lecture 08).

    import minigrad as mg
    fast = mg.compile(model)                  # or @mg.compile, @mg.compile(fullgraph=True)
    fast(x)                                   # traces; later calls with the same guards replay the graph
    print(mg.compile.explain(fn, x))          # graphs, graph breaks with their lines, fused kernels
    graph = fast.graphs()[0]; graph.print_readable(); graph.draw()

    api.py       mg.compile: guards, the graph cache, replay vs eager
    piecewise.py a trace with graph breaks cut into pieces, each compiled (piecewise replay's plan)
    replay.py    piecewise replay of a call: Python runs, matched ops take their values from the pieces
    tracer.py    capture: a forward wrapper records ops, sys.setprofile finds host reads (graph breaks)
    frames.py    which frames are the op library and which are your program; source lines
    ir.py        Node and Graph; print_readable; the generated replay code
    explain.py   explain()
    draw.py      the graph as a picture
    fusion/      the elementwise-fusion pass and its NumPy / CuPy code generators

This module is callable (``mg.compile(fn)``), as ``torch.compile`` is a function next to ``torch._dynamo``.
"""
import sys
import types

from . import draw as _draw  # noqa: F401  (binds Graph.draw)
from .api import CompiledFunction, compile as _compile
from .explain import ExplainOutput, explain
from .fusion import FusedElementwise, FusedKernel, find_chains, fuse, fused_kernels
from .ir import Graph, Node
from .tracer import GraphBreak, GraphBreakError, Tracer


class _CallableModule(types.ModuleType):
    def __call__(self, fn=None, **options):
        return _compile(fn, **options)


sys.modules[__name__].__class__ = _CallableModule

__all__ = ["CompiledFunction", "ExplainOutput", "FusedElementwise", "FusedKernel", "Graph", "GraphBreak",
           "GraphBreakError", "Node", "Tracer", "explain", "find_chains", "fuse", "fused_kernels"]
