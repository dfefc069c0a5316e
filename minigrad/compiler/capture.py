"""Graph capture: run the function once, eagerly, and write down what it did.

Three listeners sit at the core's extension points (``autograd/extensions.py``) for the one call:

* ``forward_wrappers``: each ``Function.apply`` becomes a ``call_op`` node whose inputs are the nodes that
  made its tensor arguments (what an op runs inside its own forward is not recorded);
* ``outside_apply_wrappers``: a call of a core function that makes tensors outside ``apply`` (``mg.arange(T)``,
  ``x > 0``, ``x.detach()``, ``mg.randn``: the functions marked ``@outside_apply``) becomes a ``call_function``
  node, replayed by calling the function again. A factory whose results all came from the ops it called
  (``mg.where`` on tensors) is left to those ops (``transparent``);
* ``host_reads``: ``.item()``, ``.numpy()``, ``bool(t)``, ``print(t)``... Python needs a value, so the graph
  ends there: a **graph break**, as in Dynamo.

Tensors the function reads but did not make (parameters, buffers, globals) become ``get_attr`` nodes that
hold the tensor itself. A tensor changed in place outside a recorded op after the graph used it is a graph
break too (replaying would skip the change).

Thread model: ``active`` (a context variable) holds the capture under way in this thread or task (a
``Tracer``, or a piecewise replay's ``replay.Call``); the listeners of every other capture let its events
pass, so two threads can trace or replay at once without seeing each other's ops.
"""
import contextvars
import linecache
import operator
import os
import sys
from dataclasses import dataclass

from ..autograd import extensions
from ..autograd.grad_mode import is_grad_enabled
from ..tensor import Tensor
from .ir import Graph, Node, flatten, map_tree, subgraph, unique_name

active = contextvars.ContextVar("minigrad_compile_capture", default=None)

REASONS = {"item": "Tensor.item()", "numpy": "Tensor.numpy()", "tolist": "Tensor.tolist()",
           "array": "np.asarray(tensor)", "bool": "bool(tensor): Python control flow on a tensor's value",
           "repr": "printing a tensor (repr)", "float": "float(tensor)", "int": "int(tensor)",
           "index": "using a tensor as a Python index"}
_SHOWN = ("minigrad.nn.modules", "minigrad.examples")   # library code a reader recognises as a program


class GraphBreakError(RuntimeError):
    """A graph break under ``fullgraph=True``; the message names the reason and the line."""


@dataclass
class GraphBreak:
    reason: str
    where: str       # 'file.py:12 in fn'
    line: str        # the source text of that line
    graph: int       # the break ends graph number ``graph`` (0-based)

    def __str__(self):
        return f"{self.reason} at {self.where}: {self.line}"


def source():
    """(``'file.py:12 in fn'``, the line's text) of the innermost frame of the program: not minigrad's own
    op library, autograd or compiler (model code in ``nn.modules`` and the examples counts as program)."""
    f = sys._getframe(1)
    while f is not None:
        module = f.f_globals.get("__name__", "")
        if not module.startswith("minigrad.") or module.startswith(_SHOWN):
            code = f.f_code
            return (f"{os.path.basename(code.co_filename)}:{f.f_lineno} in {code.co_name}",
                    linecache.getline(code.co_filename, f.f_lineno).strip())
        f = f.f_back
    return "", ""


def tensor_meta(t):
    return {"shape": tuple(t.shape), "dtype": t.array.dtype, "device": t.device,
            "requires_grad": bool(t.requires_grad), "contiguous": bool(t.array.flags.c_contiguous)}


def tensors_of(tree):
    return [a for a in flatten(tree) if isinstance(a, Tensor)]


class Capture:
    """What the tracer and a piecewise replay (``replay.Call``) share: their three listeners, registered for
    one call of the function, hear only this thread's program (``mine``: not another capture's events, not
    the ops that ops or the compiler itself run, ``quietly``)."""
    outermost = False   # a replay's wrappers go outside the others, which then never see a stand-in
    depth = 0           # > 0 while an op runs or the compiler runs ops itself: not the program

    def run(self, fn, args, kwargs):
        """Call ``fn`` eagerly under the listeners; returns its result."""
        token = active.set(self)
        handles = [extensions.forward_wrappers.add(self.on_op, outermost=self.outermost),
                   extensions.outside_apply_wrappers.add(self.on_call, outermost=self.outermost),
                   extensions.host_reads.add(self.on_read)]
        ok = False
        try:
            result = fn(*args, **kwargs)
            ok = True
        finally:
            for h in handles:
                h.remove()
            active.reset(token)
            self.finish(ok)
        return result

    def mine(self):
        return not self.depth and active.get() is self

    def quietly(self, run, *args):
        """``run(*args)`` with the listeners deaf: ops it calls are not the program's."""
        self.depth += 1
        try:
            return run(*args)
        finally:
            self.depth -= 1


class Tracer(Capture):
    """Records one call of a function (``run``); ``graphs()`` / ``full_graph()`` are what it saw."""

    def __init__(self, names=None, fullgraph=False, outer=None):
        self.nodes, self.breaks, self.fullgraph, self.outer = [], [], fullgraph, outer
        self.values = {}          # id(tensor) -> [tensor, node, version when last seen]
        self.names, self.taken = names or {}, {}
        self.grad_enabled = is_grad_enabled()
        self.output = self.last_read = None
        self.observed = []        # nodes whose values host reads looked at (piecewise replay keeps them real)
        self.unsafe = []          # why running the Python again would double an effect (piecewise.py)
        self.transparent = set()  # factories left to their ops (piecewise replay lets them run)

    def run(self, fn, args, kwargs):
        for i, t in enumerate(tensors_of((args, kwargs))):
            if self.entry(t) is None:
                name = unique_name(self.names.get(id(t), f"arg{i}"), self.taken)
                self.bind(t, self._add(Node("placeholder", i, name=name, meta=tensor_meta(t))))
        self.output = super().run(fn, args, kwargs)
        return self.output

    def finish(self, ok):
        """Tensors changed in place outside any recorded op (an input's ``sub_``, ``y[0] = v``): replaying
        the graph would skip the change."""
        for t, node, version in list(self.values.values()) if ok else ():
            # a view took its base's counter after it was recorded: its base's entry speaks for it
            if t._version != version and not getattr(t, "_is_view", False):
                self.values[id(t)][2] = t._version
                what = " (an input or parameter)" if node.kind in ("placeholder", "get_attr") else ""
                self._graph_break(f"in-place change of {node.name}{what} outside a recorded op", located=False)

    def graphs(self):
        """One Graph per segment between graph breaks (a function without breaks has exactly one): its
        nodes, returning what later graphs read, what Python read (host reads) and what the function returns."""
        leaving, graphs = self.leaving(lambda n: n.meta["segment"]), []
        for g in range(len(self.breaks) + 1):
            mine = [n for n in self.nodes if n.meta["segment"] == g and n.kind != "placeholder"]
            graphs.append(subgraph(mine, tuple(n for n in mine if n in leaving), f"graph_{g}")[0])
        return graphs

    def full_graph(self):
        """The whole trace as one replayable Graph (only meaningful without graph breaks)."""
        return Graph(self.nodes, map_tree(lambda x: self.ref(x) if isinstance(x, Tensor) else x, self.output),
                     name="graph_0")

    def leaving(self, group):
        """The nodes whose values leave their group (``group(node)``: a segment, a piece): read by a node of
        another group, looked at by a host read, or returned by the function."""
        out = {a for n in self.nodes for a in n.inputs() if group(a) != group(n)}
        return out.union(self.observed, (a for a in flatten(map_tree(self.known, self.output)) if a is not None))

    # --- the listeners -----------------------------------------------------------------------------
    def on_op(self, op, args, kwargs, run):
        if not self.mine():
            return run()
        ins = map_tree(self.ref, (args, kwargs))
        out = self.quietly(run)
        node = self._add(Node("call_op", op, ins[0], ins[1], name=unique_name(op.name, self.taken),
                              meta=tensor_meta(out)))
        self._changed_inputs(args, [node], op.name)
        self.bind(out, node)
        return out

    def on_call(self, fn, args, kwargs, run):
        if not self.mine():
            return run()
        start = len(self.nodes)
        out = run()
        inner = self.nodes[start:]
        self._changed_inputs(tensors_of((args, kwargs)), inner, fn.__name__)   # batch_norm: after its op
        results = tensors_of(out) if isinstance(out, (Tensor, tuple, list)) else []
        if not results or (all(self.entry(t) for t in results) and all(n.kind == "call_op" for n in inner)):
            self.transparent.add(fn)
            return out
        gone = set(inner)   # the call replaces what ran inside it (``randn`` calls ``tensor``)
        del self.nodes[start:]
        self.values = {k: v for k, v in self.values.items() if v[1] not in gone}
        self.record_call(fn, args, kwargs, out)
        return out

    def _changed_inputs(self, args, nodes, name):
        """An argument whose version moved during the call was changed by it (running statistics): the nodes
        that read it replay the change, and the Python around them may not run twice (``unsafe``)."""
        for a in args:
            e = self.entry(a)
            if e is not None and e[2] != a._version:
                e[2] = a._version
                for n in nodes:
                    if e[1] in n.inputs():
                        n.meta["mutates"] = True
                        self.unsafe.append(f"{name} changes an input in place ({n.meta['where']})")

    def on_read(self, t, what):
        if not self.mine() or self.last_read == (id(t), len(self.nodes)):
            return   # bool(t) calls t.item(): one read, one break
        self.last_read = (id(t), len(self.nodes))
        self._graph_break(REASONS.get(what, what))
        if self.known(t) is not None:
            self.observed.append(self.known(t))

    # --- recording -----------------------------------------------------------------------------------
    def record_call(self, fn, args, kwargs, out):
        """A ``call_function`` node for ``fn(*args, **kwargs)`` that returned ``out`` (a tensor, or a tuple
        or list of them: then one ``getitem`` node per tensor)."""
        ins, name = map_tree(self.ref, (args, kwargs)), unique_name(getattr(fn, "__name__", "call"), self.taken)
        node = self._add(Node("call_function", fn, ins[0], ins[1], name=name,
                              meta=tensor_meta(out) if isinstance(out, Tensor) else None))
        if isinstance(out, Tensor):
            return self.bind(out, node)
        for i, t in enumerate(out):
            if isinstance(t, Tensor):
                self.bind(t, self._add(Node("call_function", operator.getitem, (node, i),
                                            name=unique_name(f"{name}_{i}", self.taken), meta=tensor_meta(t))))
        return node

    def entry(self, t):
        e = self.values.get(id(t))
        return e if e is not None and e[0] is t else None

    def known(self, x):
        """The node of ``x`` if it is a tensor the trace knows, else None."""
        e = self.entry(x) if isinstance(x, Tensor) else None
        return None if e is None else e[1]

    def bind(self, t, node):
        self.values[id(t)] = [t, node, t._version]
        return node

    def ref(self, a):
        """The node for argument ``a`` when it is a Tensor (a ``get_attr`` for tensors from outside)."""
        if not isinstance(a, Tensor):
            return a
        e = self.entry(a)
        if e is not None:
            if a._version != e[2]:
                e[2] = a._version
                self._graph_break("in-place change of a tensor after the graph used it")
            return e[1]
        outer = self.outer.known(a) if self.outer is not None else None
        if outer is not None and outer.kind != "get_attr":
            raise GraphBreakError(f"scan: the body reads {outer.name} ({source()[0]}), a tensor computed "
                                  f"outside it; pass it in the carry or in xs")
        return self.bind(a, self._add(Node("get_attr", a, name=unique_name(self.names.get(id(a), "const"),
                                                                           self.taken), meta=tensor_meta(a))))

    def _add(self, node):
        node.meta.update(segment=len(self.breaks), grad=is_grad_enabled())
        if node.kind.startswith("call"):
            node.meta["where"] = source()[0]
        self.nodes.append(node)
        return node

    def _graph_break(self, reason, located=True):
        where, line = source() if located else ("(found when the function returned)", "")
        brk = GraphBreak(reason, where, line, len(self.breaks))
        if self.fullgraph:
            raise GraphBreakError(f"graph break under fullgraph=True: {brk}")
        if reason.startswith("in-place"):
            self.unsafe.append(f"{reason} ({brk.where})")
        self.breaks.append(brk)
