"""minigrad.compiler: what ``mg.compile`` is made of (lecture 08). A call, in the order a reader meets it:

    api.py        mg.compile: guards, the graph cache; the first call traces, later ones replay; explain()
    capture.py    the trace: listeners at the core's extension points record ops and graph breaks
    ir.py         Node and Graph (the public IR), print_readable, the generated replay code;  draw.py
    passes.py     constant folding, common sub-expression elimination, dead-code elimination
    fusion/       the elementwise-fusion pass and its NumPy / CUDA kernel generators
    piecewise.py  a trace with graph breaks cut into pieces, each compiled (the plan)
    replay.py     piecewise replay of a call: Python runs, matched ops take their values from the pieces
    loops.py      scan: a loop as one graph node
"""
from .api import CompiledFunction, ExplainOutput, compile, explain
from .capture import GraphBreak, GraphBreakError, Tracer
from .fusion import FusedElementwise, FusedKernel, find_chains, fuse, fused_kernels
from .ir import Graph, Node
from .loops import scan
from .passes import eliminate_common_subexpressions, eliminate_dead_code, fold_constants, optimize

__all__ = ["CompiledFunction", "ExplainOutput", "FusedElementwise", "FusedKernel", "Graph", "GraphBreak",
           "GraphBreakError", "Node", "Tracer", "compile", "eliminate_common_subexpressions",
           "eliminate_dead_code", "explain", "find_chains", "fold_constants", "fuse", "fused_kernels",
           "optimize", "scan"]
