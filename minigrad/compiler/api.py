"""``mg.compile``: trace on the first call, replay on later calls whose guards pass; ``explain``'s report.

Guards are what the graph assumed: each input tensor's shape, dtype, device and requires_grad, which inputs
are the same tensor, the values of non-tensor arguments (a Python number that changes every call retraces
every call, until the cache limit), grad mode, the registered input casts (autocast) and, for a module, every
submodule's ``training`` flag. A miss traces again (a new graph per guard set) until ``cache_size_limit``
graphs exist, then the function runs eagerly with a warning.

A function traced **without graph breaks** is replayed from its graph (optimised by ``passes.py``, fused):
generated straight-line code calls ``op.apply`` (so autograd records backward as in eager mode) and the
fused kernels; the Python function does not run again, so its side effects and the Python values it did not
derive from the inputs are frozen at trace time, as with ``torch.jit.trace``. A function **with graph
breaks** is replayed **piecewise**, as Dynamo resumes between its graphs: its Python runs on every call while
its ops take their values from compiled pieces (``piecewise.py``, ``replay.py``); off the traced path a call
deoptimises to eager, and after ``DEOPT_LIMIT`` deoptimised calls in a row, or when its Python cannot run
twice without doubling an effect, the guard set runs eagerly, as ``explain`` reports. ``fullgraph=True``
makes any break an error naming its line.

``stats``: ``traces``, ``replays`` (whole-graph replays), ``piecewise`` (calls replayed piecewise, deopted or
not), ``deopts`` (piecewise calls that went eager part-way) and ``eager`` (calls run eagerly). ``mg.compile``
is an ordinary function, as ``torch.compile`` is, with three attributes: ``explain``, ``scan`` and
``GraphBreakError``.
"""
import functools
import inspect
import warnings

from ..autograd import extensions
from ..autograd.grad_mode import is_grad_enabled
from ..tensor import Tensor
from .capture import GraphBreakError, Tracer, tensors_of
from .fusion import fuse, fused_kernels
from .loops import scan
from .passes import lower, optimize
from .piecewise import Plan
from .replay import Call

DEOPT_LIMIT = 2   # deoptimised piecewise calls in a row after which a guard set runs eagerly


def _guard(x):
    if isinstance(x, Tensor):
        return ("T", x.array.shape, x.array.dtype, x.device, x.requires_grad)
    if isinstance(x, (tuple, list)):
        return (type(x).__name__,) + tuple(_guard(v) for v in x)
    if isinstance(x, dict):
        return ("dict",) + tuple((k, _guard(v)) for k, v in x.items())
    try:
        hash(x)
        return ("C", type(x).__name__, x)
    except TypeError:
        return ("O", id(x))


class _Entry:
    """One cached trace: its graph (None with graph breaks) or piecewise plan, and what it saw."""

    def __init__(self, tracer, graph=None, plan=None):
        self.graphs, self.breaks = tracer.graphs(), list(tracer.breaks)
        self.graph, self.plan = graph, plan
        self.deopts = 0        # deoptimised calls in a row

    @property
    def why_eager(self):
        """Why later calls run eagerly (None when they replay)."""
        return None if self.graph is not None else self.plan.why_not


class CompiledFunction:
    """What ``mg.compile(fn)`` returns. ``.stats`` counts traces, replays and eager calls."""

    def __init__(self, fn, *, fullgraph=False, fuse=True, optimize=True, cache_size_limit=8, block_size=None,
                 module=None):
        self.fn, self.fullgraph, self.fuse, self.optimize = fn, fullgraph, fuse, optimize
        self.cache_size_limit, self.block_size, self.module = cache_size_limit, block_size, module
        self.cache, self._warned = {}, False
        self.stats = {"traces": 0, "replays": 0, "eager": 0, "piecewise": 0, "deopts": 0}
        functools.update_wrapper(self, fn if module is None else module.forward, updated=())

    def guard_key(self, args, kwargs, tensors):
        ids = [id(a) for a in tensors]
        aliases = tuple(ids.index(t) for t in ids)   # f(x, x) and f(x, y) are different graphs
        extra = (aliases, is_grad_enabled(), tuple(id(c) for c in extensions.input_casts.callbacks))
        if self.module is not None:
            extra += (tuple(m.training for m in self.module.modules()),)
        return _guard((args, kwargs)) + extra

    def __call__(self, *args, **kwargs):
        tensors = tensors_of((args, kwargs))
        key = self.guard_key(args, kwargs, tensors)
        entry = self.cache.get(key)
        if entry is None:
            if len(self.cache) < self.cache_size_limit:
                result, self.cache[key] = self._trace(args, kwargs)
                return result
            if not self._warned:
                warnings.warn(f"mg.compile: {self.__name__} was traced {len(self.cache)} times (cache_size_limit"
                              f"={self.cache_size_limit}); running it eagerly for new guard sets. Inputs whose "
                              f"shapes keep changing are the usual cause.", RuntimeWarning, stacklevel=2)
                self._warned = True
        elif entry.graph is not None:
            self.stats["replays"] += 1
            return entry.graph(tensors)
        elif entry.why_eager is None:
            return self._piecewise(entry, args, kwargs, tensors)
        self.stats["eager"] += 1
        return self.fn(*args, **kwargs)

    def _piecewise(self, entry, args, kwargs, tensors):
        self.stats["piecewise"] += 1
        call = Call(entry.plan, tensors)
        result = call.run(self.fn, args, kwargs)
        entry.deopts = 0 if call.deopted is None else entry.deopts + 1
        if call.deopted is not None:
            self.stats["deopts"] += 1
            if entry.deopts >= DEOPT_LIMIT:
                entry.plan.why_not = (f"deoptimised {entry.deopts} calls in a row (Python leaves the traced "
                                      f"path), the last because {call.deopted}")
        return result

    def _trace(self, args, kwargs):
        self.stats["traces"] += 1
        tracer = Tracer(self._names(args, kwargs), fullgraph=self.fullgraph)
        result = tracer.run(self.fn, args, kwargs)
        if tracer.breaks:
            return result, _Entry(tracer, plan=Plan(tracer, self.fuse, self.optimize, self.block_size))
        return result, _Entry(tracer, lower(tracer.full_graph(), tracer.grad_enabled, self.fuse, self.optimize,
                                            self.block_size))

    def _names(self, args, kwargs):
        """id(tensor) -> a readable name: parameters by their module path, inputs by parameter name."""
        names = {}
        if self.module is not None:
            for n, t in list(self.module.named_parameters()) + list(self.module.named_buffers()):
                names[id(t)] = n.replace(".", "_")
        try:
            bound = inspect.signature(self.fn if self.module is None else self.module.forward).bind(*args, **kwargs)
            for n, v in bound.arguments.items():
                if isinstance(v, Tensor):
                    names.setdefault(id(v), n)
        except (TypeError, ValueError):
            pass
        return names

    def graphs(self):
        """The graphs of every cached trace: the fused ones that replay (a whole graph, or the pieces of a
        piecewise replay), else the traced segments."""
        out = []
        for e in self.cache.values():
            out += [e.graph] if e.graph is not None else e.plan.graphs() if e.why_eager is None else e.graphs
        return out

    def __getattr__(self, name):  # a compiled module still answers .parameters(), .train(), ...
        module = self.__dict__.get("module")
        if module is None:
            raise AttributeError(name)
        return getattr(module, name)

    def __repr__(self):
        return f"<compiled {getattr(self, '__name__', 'fn')}: {len(self.cache)} graph(s), {self.stats}>"


def compile(fn=None, *, fullgraph=False, fuse=True, optimize=True, cache_size_limit=8, block_size=None):
    """Compile a function or an ``nn.Module``; usable as ``@mg.compile`` or ``@mg.compile(fullgraph=True)``.

    Like ``torch.compile`` (same name, same place: it shadows the builtin only inside minigrad's
    namespace). ``optimize`` runs the graph passes, ``fuse`` the elementwise-fusion pass; ``block_size`` is
    the fused kernels' block (in elements). Returns a ``CompiledFunction`` (for a module, one that forwards
    attribute access to it).
    """
    opts = dict(fullgraph=fullgraph, fuse=fuse, optimize=optimize, cache_size_limit=cache_size_limit,
                block_size=block_size)
    if fn is None:
        return functools.partial(compile, **opts)
    if hasattr(fn, "named_parameters") and hasattr(fn, "forward"):
        return CompiledFunction(fn.__call__, module=fn, **opts)
    return CompiledFunction(fn, **opts)


def explain(fn, *args, **kwargs):
    """Trace ``fn(*args, **kwargs)`` once, eagerly (its side effects happen once), and return what capture
    made of it, as ``torch._dynamo.explain`` does: an ``ExplainOutput`` (print it for the report). ``fn``:
    a function, an ``nn.Module`` or what ``mg.compile`` returned (then with its options)."""
    compiled = fn if isinstance(fn, CompiledFunction) else compile(fn)
    tracer = Tracer(compiled._names(args, kwargs))
    tracer.run(compiled.fn, args, kwargs)
    return ExplainOutput(tracer, compiled.block_size)


class ExplainOutput:
    """The graphs and graph breaks (each break's reason with its source line), how later calls replay, the
    ops per graph with the op count after each pass and after fusion, the fused kernels with their source.
    Graph Count counts the graphs that hold ops, as Dynamo does (two breaks with nothing between them, ``if
    loss > 1`` then ``loss.item()``, leave an empty graph)."""

    def __init__(self, tracer, block_size=None):
        self.graphs = [g for g in tracer.graphs() if len(g)]
        self.break_reasons = list(tracer.breaks)
        unsafe = "; ".join(dict.fromkeys(tracer.unsafe))
        self.replay = "whole graph (Python does not run again)" if not self.break_reasons else \
            f"eager on later calls: {unsafe}" if unsafe else \
            "piecewise (Python runs again; the ops between breaks come from compiled graphs)"
        self.optimized = [optimize(g) for g in self.graphs]
        self.fused_graphs = [fuse(g, block_size) for g in self.optimized]
        self.kernels = [k for g in self.fused_graphs for k in fused_kernels(g)]
        self.graph_count, self.graph_break_count = len(self.graphs), len(self.break_reasons)
        self.ops_per_graph = [g.op_counts() for g in self.graphs]
        self.op_count = sum(len(g) for g in self.graphs)

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
            lines += ["Fused kernels:"] + ["  " + line for k in self.kernels for line in k.sources().splitlines()]
        return "\n".join(lines)

    __repr__ = __str__


compile.explain, compile.scan, compile.GraphBreakError = explain, scan, GraphBreakError
