"""What ``mg.compile.explain(fn, *args)`` reports (``api.explain`` runs the trace), as ``torch._dynamo.explain``:
the graphs and graph breaks, each break's reason with its source line, how later calls replay, the ops per
graph with the op count after each graph pass and after fusion, and the fused kernels with their source.

Graph Count counts the graphs that hold ops, as Dynamo does: two breaks with nothing between them (``if
loss > 1`` and then ``loss.item()``) leave an empty graph, which is not counted.
"""
from .fusion import fuse, fused_kernels
from .passes import optimize


class ExplainOutput:
    def __init__(self, tracer, block_size=None):
        graphs = tracer.graphs()
        self.graphs = [g for g in graphs if len(g)]
        self.break_reasons = list(tracer.breaks)
        reasons = "; ".join(dict.fromkeys(tracer.unsafe))
        self.replay = "whole graph (Python does not run again)" if not self.break_reasons else \
            f"eager on later calls: {reasons}" if reasons else \
            "piecewise (Python runs again; the ops between breaks come from compiled graphs)"
        self.optimized = [optimize(g) for g in self.graphs]
        self.fused_graphs = [fuse(g, block_size) for g in self.optimized]
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
        for g, o, f in zip(self.graphs, self.optimized, self.fused_graphs):
            ops = ", ".join(f"{k} x{v}" for k, v in sorted(g.op_counts().items()))
            passes = ", ".join(f"{name} {n}" for name, n in list(o.passes.items())[1:])
            lines.append(f"  {g.name}: {len(g)} ops ({ops})\n    after {passes}; after fusion {len(f)}")
        if self.kernels:
            lines.append("Fused kernels:")
            lines += ["  " + line for k in self.kernels for line in k.sources().splitlines()]
        return "\n".join(lines)

    __repr__ = __str__


__all__ = ["ExplainOutput"]
