"""Graph capture: run the function once, eagerly, and write down what it did.

Two listeners are on while a function is traced:

* a forward wrapper (``autograd/extensions.py``) around every ``Function.apply``: each op becomes a
  ``call_op`` node whose inputs are the nodes that made its tensor arguments;
* ``sys.setprofile``, which sees every Python call. It finds what ``Function.apply`` does not show:
  tensors made outside it (``x > 0``, ``mg.arange(T)``, ``x.detach()``: recorded as ``call_function``
  nodes, calls into the op library made by program code, see ``frames.py``) and *host reads* —
  ``.item()``, ``.numpy()``, ``.tolist()``, ``bool(t)``, ``repr(t)`` — where Python needs a tensor's value
  and the graph must end: a **graph break**, as in Dynamo. The core needs no hook for this.

Tensors the function reads but did not make (parameters, buffers, globals) become ``get_attr`` nodes that
hold the tensor itself. A tensor changed in place after the graph used it, or a library call whose inner
tensors cannot be attributed (a tensor made inside it without its inputs showing), are handled
conservatively: the first is a graph break, the second is recorded as one opaque ``call_function`` node.
"""
import operator
import sys
from dataclasses import dataclass

import numpy as np

from ..autograd import extensions
from ..autograd.grad_mode import is_grad_enabled
from ..tensor import Tensor
from . import frames
from .ir import Graph, Node, flatten, map_tree, unique_name


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


_HOST_READS = {Tensor.item: "Tensor.item()", Tensor.numpy: "Tensor.numpy()", Tensor.tolist: "Tensor.tolist()",
               Tensor.__array__: "np.asarray(tensor)", Tensor.__bool__: "bool(tensor): Python control flow on "
               "a tensor's value", Tensor.__repr__: "printing a tensor (repr)", Tensor.__float__: "float(tensor)",
               Tensor.__int__: "int(tensor)", Tensor.__index__: "using a tensor as a Python index"}
_HOST_READS = {f.__code__: why for f, why in _HOST_READS.items()}
_MAKE = Tensor._make.__code__


def tensor_meta(t, where=""):
    return {"shape": tuple(t.shape), "dtype": t.data.dtype, "device": t.device,
            "requires_grad": bool(t.requires_grad), "contiguous": bool(t.data.flags.c_contiguous), "where": where}


class _Primitive:
    """A call into the op library from program code, in progress."""
    __slots__ = ("frame", "args", "kwargs", "start", "opaque", "touched")

    def __init__(self, frame, start):
        self.frame, self.start, self.opaque, self.touched = frame, start, False, []
        self.args, self.kwargs = frames.call_arguments(frame)


class Tracer:
    def __init__(self, names=None, fullgraph=False):
        self.nodes, self.breaks, self.fullgraph = [], [], fullgraph
        self.values = {}      # id(tensor) -> [tensor, node, version when last seen]
        self.fresh = {}       # id(tensor) -> tensor made by Tensor._make during the trace (kept alive)
        self.names = names or {}
        self.taken = set()
        self.depth = 0        # > 0 while an op's forward runs: its inner workings are not the program
        self.host = []        # host-read frames in progress (bool() calls item(): one break)
        self.prim = None      # the library call in progress, if any
        self.grad_enabled = is_grad_enabled()
        self.output = None
        self.observed = []    # nodes of the tensors host reads looked at (piecewise replay keeps them real)
        self.unsafe = []      # why replaying Python piecewise would double an effect (replay.py)

    # --- running -----------------------------------------------------------------------------------
    def run(self, fn, args, kwargs):
        """Call ``fn`` eagerly under the listeners; returns its result (the graph is in ``self``)."""
        for i, t in enumerate(a for a in flatten((args, kwargs)) if isinstance(a, Tensor)):
            node = self._add(Node("placeholder", i, name=unique_name(self.names.get(id(t), f"arg{i}"),
                                                                   self.taken), meta=tensor_meta(t)))
            self.values.setdefault(id(t), [t, node, t._version_counter.value])
        previous = sys.getprofile()
        handle = extensions.forward_wrappers.add(self._record_op)
        sys.setprofile(self._profile)
        try:
            result = fn(*args, **kwargs)
        finally:
            sys.setprofile(previous)
            handle.remove()
        self._check_versions()
        self.output = result
        return result

    def graphs(self):
        """One Graph per segment between graph breaks (a function without breaks has exactly one)."""
        n_graphs = len(self.breaks) + 1
        out = []
        for g in range(n_graphs):
            out.append(self._segment(g, n_graphs))
        return out

    def full_graph(self):
        """The whole trace as one replayable Graph (only meaningful without graph breaks)."""
        def leaf(x):
            return self._ref(x, None) if isinstance(x, Tensor) else x
        output = map_tree(leaf, self.output)
        self.fresh.clear()
        return Graph(self.nodes, output, name="graph_0")

    # --- listeners ---------------------------------------------------------------------------------
    def _record_op(self, op, args, kwargs, run):
        if self.depth:
            return run()
        frame = sys._getframe(1)
        ins = map_tree(lambda a: self._ref(a, frame), (args, kwargs))
        self.depth += 1
        try:
            out = run()
        finally:
            self.depth -= 1
        for a in args:  # changes made by the op itself (running statistics) are replayed with it
            if isinstance(a, Tensor) and id(a) in self.values:
                if self.values[id(a)][2] != a._version_counter.value:
                    self.unsafe.append(f"{op.name} changes an input in place ({frames.where(frame)})")
                self.values[id(a)][2] = a._version_counter.value
                if self.prim is not None:   # ... and so are the version bumps its library call adds
                    self.prim.touched.append(a)
        node = self._add(Node("call_op", op, ins[0], ins[1], name=unique_name(op.name, self.taken),
                              meta=tensor_meta(out, frames.where(frame))))
        self.values[id(out)] = [out, node, out._version_counter.value]
        return out

    def _profile(self, frame, event, arg):
        if self.depth:
            return
        code = frame.f_code
        if event == "call":
            why = _HOST_READS.get(code)
            if why is not None:
                if not self.host:
                    self._graph_break(why, frame)
                    t = frame.f_locals.get("self")
                    entry = self.values.get(id(t))
                    if entry is not None and entry[0] is t:
                        self.observed.append(entry[1])
                self.host.append(frame)
            elif self.prim is None and frames.kind(code) == "primitive" and frame.f_back is not None \
                    and frames.kind(frame.f_back.f_code) == "program":
                try:
                    self.prim = _Primitive(frame, len(self.nodes))
                except (KeyError, IndexError):   # an unusual signature: record what runs inside instead
                    self.prim = None
        elif event == "return":
            if self.host and self.host[-1] is frame:
                self.host.pop()
            if code is _MAKE and isinstance(arg, Tensor):
                self.fresh[id(arg)] = arg
            if self.prim is not None and self.prim.frame is frame:
                prim, self.prim = self.prim, None
                self._finish_primitive(prim, arg)

    # --- helpers -----------------------------------------------------------------------------------
    def _add(self, node):
        node.meta["segment"] = len(self.breaks)
        node.meta["grad"] = is_grad_enabled()
        self.nodes.append(node)
        return node

    def _ref(self, a, frame):
        """The node for argument ``a`` (a Tensor), creating a ``get_attr`` for tensors from outside."""
        if isinstance(a, np.ndarray) and self.prim is not None:
            self.prim.opaque = True   # an array made from a tensor inside a library call: keep the call whole
            return a
        if not isinstance(a, Tensor):
            return a
        entry = self.values.get(id(a))
        if entry is not None and entry[0] is a:
            if a._version_counter.value != entry[2]:
                entry[2] = a._version_counter.value
                self._graph_break("in-place change of a tensor after the graph used it", frame)
            return entry[1]
        if id(a) in self.fresh and self.prim is not None:
            self.prim.opaque = True   # made inside the library call from unknown inputs
        name = self.names.get(id(a), "const")
        node = self._add(Node("get_attr", a, name=unique_name(name, self.taken), meta=tensor_meta(a)))
        self.values[id(a)] = [a, node, a._version_counter.value]
        return node

    def _finish_primitive(self, prim, result):
        made = {id(e[0].grad_fn): e[1] for e in self.values.values()
                if e[0].grad_fn is not None and e[1].meta.get("segment") is not None and e[1] in
                self.nodes[prim.start:]} if prim.touched else {}
        for t in prim.touched:
            entry = self.values.get(id(t))
            if entry is not None and entry[0] is t:
                node = made.get(id(t.grad_fn))
                if node is not None and node is not entry[1]:   # written in place: t now holds node's value
                    entry[1] = node                             # (``y[0] = v``: SetItem, then rebased onto it)
                    self.unsafe.append(f"in-place write into {node.name} ({frames.where(prim.frame)})")
                elif entry[2] != t._version_counter.value:      # running statistics
                    self.unsafe.append(f"{prim.frame.f_code.co_name} changes an input in place "
                                       f"({entry[1].name}, {frames.where(prim.frame)})")
                entry[2] = t._version_counter.value
        outs = [result] if isinstance(result, Tensor) else \
            list(result) if isinstance(result, (tuple, list)) else []
        unknown = [t for t in outs if isinstance(t, Tensor) and
                   not (id(t) in self.values and self.values[id(t)][0] is t)]
        if not (prim.opaque or unknown):
            return
        fn = frames.function_of(prim.frame)
        if fn is None:
            self._graph_break(f"cannot record a call to {prim.frame.f_code.co_name}", prim.frame)
            return
        removed = set(self.nodes[prim.start:])   # an opaque call replaces what ran inside it
        if any(n.kind == "call_op" for n in removed):
            self.unsafe.append(f"{prim.frame.f_code.co_name} is recorded as one opaque call; its inner ops "
                               f"would run again in Python ({frames.where(prim.frame)})")
        del self.nodes[prim.start:]
        self.values = {k: v for k, v in self.values.items() if v[1] not in removed}
        ins = map_tree(lambda a: self._ref(a, None) if isinstance(a, Tensor) else a, (prim.args, prim.kwargs))
        where = frames.where(prim.frame)
        name = getattr(fn, "__name__", "call").strip("_")
        if isinstance(result, Tensor):
            node = self._add(Node("call_function", fn, ins[0], ins[1], name=unique_name(name, self.taken),
                                  meta=tensor_meta(result, where)))
            self.values[id(result)] = [result, node, result._version_counter.value]
            return
        node = self._add(Node("call_function", fn, ins[0], ins[1], name=unique_name(name, self.taken),
                              meta={"where": where}))
        for i, t in enumerate(outs):
            if isinstance(t, Tensor):
                item = self._add(Node("call_function", operator.getitem, (node, i),
                                      name=unique_name(f"{name}_{i}", self.taken), meta=tensor_meta(t, where)))
                self.values[id(t)] = [t, item, t._version_counter.value]

    def _graph_break(self, reason, frame):
        where = frames.where(frame) if frame is not None else "(found when the function returned)"
        brk = GraphBreak(reason, where, frames.source_line(frame) if frame is not None else "", len(self.breaks))
        if self.fullgraph:
            raise GraphBreakError(f"graph break under fullgraph=True: {brk}")
        if reason.startswith("in-place"):
            self.unsafe.append(f"{reason} ({brk.where})")
        self.breaks.append(brk)

    def _check_versions(self):
        """Tensors changed in place outside any recorded op (an input's ``sub_``, ``y[0] = v`` on a result
        returned afterwards): replaying would skip the change."""
        for t, node, version in list(self.values.values()):
            # a view took its base's counter after it was recorded: its base's entry speaks for it
            if t._version_counter.value != version and not getattr(t, "_is_view", False):
                self.values[id(t)][2] = t._version_counter.value
                what = " (an input or parameter)" if node.kind in ("placeholder", "get_attr") else ""
                self._graph_break(f"in-place change of {node.name}{what} outside a recorded op", None)

    def _segment(self, g, n_graphs):
        """Graph ``g``: its nodes, placeholders for what earlier graphs made, outputs for what later read."""
        mine = [n for n in self.nodes if n.meta["segment"] == g and n.kind != "placeholder"]
        inside = set(mine)
        copies, head = {}, []
        for n in mine:
            for a in n.inputs():
                if a not in inside and a not in copies:
                    kind, target = ("get_attr", a.target) if a.kind == "get_attr" else ("placeholder", len(head))
                    copies[a] = Node(kind, target, name=a.name, meta=a.meta)
                    head.append(copies[a])
        body = []
        for n in mine:
            args, kwargs = map_tree(lambda a: copies.get(a, a) if isinstance(a, Node) else a, (n.args, n.kwargs))
            copies[n] = Node(n.kind, n.target, args, kwargs, name=n.name, meta=n.meta)
            body.append(copies[n])
        read_later = [a for n in self.nodes if n.meta["segment"] > g for a in n.inputs() if a in inside]
        if g == n_graphs - 1:
            read_later += [a for a in flatten(map_tree(self._known, self.output)) if a in inside]
        return Graph(head + body, tuple(copies[a] for a in dict.fromkeys(read_later)), name=f"graph_{g}")

    def _known(self, x):
        if isinstance(x, Tensor):
            e = self.values.get(id(x))
            return e[1] if e is not None and e[0] is x else None
        return None
