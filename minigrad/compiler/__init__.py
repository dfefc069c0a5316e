"""minigrad.compiler: what ``mg.compile`` is made of: graph capture, graph breaks, graph passes, fusion
(lecture 08). ``mg.compile`` itself is an ordinary function (``api.compile``), as ``torch.compile`` is next
to the packages that implement it.

    import minigrad as mg
    fast = mg.compile(model)                  # or @mg.compile, @mg.compile(fullgraph=True)
    fast(x)                                   # traces; later calls with the same guards replay the graph
    print(mg.compile.explain(fn, x))          # graphs, graph breaks with their lines, passes, fused kernels
    graph = fast.graphs()[0]; graph.print_readable(); graph.draw()

A call, in the order a reader meets it:

    api.py        mg.compile: guards, the graph cache; the first call traces, later ones replay
    capture.py    the trace: listeners at the core's extension points record ops and graph breaks
    ir.py         Node and Graph (the public IR), print_readable, the generated replay code
    passes.py     constant folding, common sub-expression elimination, dead-code elimination
    fusion/       the elementwise-fusion pass and its NumPy / CuPy kernel generators
    piecewise.py  a trace with graph breaks cut into pieces, each compiled (the plan)
    replay.py     piecewise replay of a call: Python runs, matched ops take their values from the pieces
    loops.py      scan: a loop as one graph node
    explain.py    explain()'s report;  draw.py  Graph.draw
"""
from .api import CompiledFunction, compile, explain
from .capture import GraphBreak, GraphBreakError, Tracer
from .explain import ExplainOutput
from .fusion import FusedElementwise, FusedKernel, find_chains, fuse, fused_kernels
from .ir import Graph, Node
from .loops import scan
from .passes import eliminate_common_subexpressions, eliminate_dead_code, fold_constants, optimize

__all__ = ["CompiledFunction", "ExplainOutput", "FusedElementwise", "FusedKernel", "Graph", "GraphBreak",
           "GraphBreakError", "Node", "Tracer", "compile", "eliminate_common_subexpressions",
           "eliminate_dead_code", "explain", "find_chains", "fold_constants", "fuse", "fused_kernels",
           "optimize", "scan"]
