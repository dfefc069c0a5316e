"""``mg.compile.explain(fn, *args)``: what capture would make of ``fn`` on these inputs.

Runs ``fn`` once under the tracer (eagerly: its side effects happen once) and reports, as
``torch._dynamo.explain`` does: the number of graphs and graph breaks, each break's reason with its source
line, the ops per graph, and the kernels the fusion pass generates for each graph (with their source).
"""

from .api import CompiledFunction
from .fusion import fuse, fused_kernels
from .tracer import Tracer


class ExplainOutput:
    def __init__(self, graphs, breaks, block_size=None, unsafe=()):
        self.graphs = [g for g in graphs if len(g)]   # as Dynamo, count graphs that hold ops
        self.break_reasons = breaks
        reasons = "; ".join(dict.fromkeys(unsafe))
        self.replay = "whole graph (Python does not run again)" if not breaks else \
            f"eager on later calls: {reasons}" if reasons else \
            "piecewise (Python runs again; the ops between breaks come from compiled graphs)"
        self.fused_graphs = [fuse(g, block_size) for g in graphs]
        self.kernels = [k for g in self.fused_graphs for k in fused_kernels(g)]

    @property
    def graph_count(self):
        return len(self.graphs)

    @property
    def graph_break_count(self):
        return len(self.break_reasons)

    @property
    def ops_per_graph(self):
        return [g.op_counts() for g in self.graphs]

    @property
    def op_count(self):
        return sum(len(g) for g in self.graphs)

    def __str__(self):
        lines = [f"Graph Count: {self.graph_count}", f"Graph Break Count: {self.graph_break_count}",
                 f"Op Count: {self.op_count}", f"Replay: {self.replay}", "Break Reasons:"]
        for i, b in enumerate(self.break_reasons, 1):
            lines.append(f"  Break Reason {i}: {b.reason}\n    {b.where}\n      {b.line}")
        lines.append("Ops per Graph:")
        for i, (g, f) in enumerate(zip(self.graphs, self.fused_graphs)):
            ops = ", ".join(f"{k} x{v}" for k, v in sorted(g.op_counts().items()))
            lines.append(f"  graph_{i}: {len(g)} ops ({ops}); after fusion {len(f)} ops")
        if self.kernels:
            lines.append("Fused kernels:")
            lines += ["  " + line for k in self.kernels for line in k.sources().splitlines()]
        return "\n".join(lines)

    __repr__ = __str__


def explain(fn, *args, **kwargs):
    """Trace ``fn(*args, **kwargs)`` once and return an ``ExplainOutput`` (print it for the report)."""
    block = None
    if isinstance(fn, CompiledFunction):
        block = fn.block_size
        names = fn._names(args, kwargs)
        fn = fn.fn
    else:
        names = {}
        if hasattr(fn, "named_parameters") and hasattr(fn, "forward"):
            names = {id(t): n.replace(".", "_") for n, t in fn.named_parameters()}
    tracer = Tracer(names)
    tracer.run(fn, args, kwargs)
    return ExplainOutput(tracer.graphs(), tracer.breaks, block, tracer.unsafe)


__all__ = ["ExplainOutput", "explain"]
