"""Piecewise replay of one call: Python runs the function again, the tensors come from compiled pieces.

``Call.run`` calls the function with three listeners at the core's extension points, as the tracer does
(``capture.py``), and follows Python's calls against the plan's ``steps``, in order:

* an op that matches the expected node (same op, the very tensors handed out for its input nodes, equal
  options) does not run. Python gets a **stand-in**: a Tensor whose ``data`` is an ``Unevaluated`` (the
  node's traced shape, dtype and layout, nothing else). When Python calls the last op of a piece, the
  piece's compiled graph runs and each stand-in of a value that leaves the piece becomes the real tensor
  (``fill``: same object, so Python's references stay valid and autograd runs through the compiled graph).
  Values the fused graph never made stay stand-ins;
* a node Python runs (``piecewise.py``: factories, integer results) runs as Python calls it;
* a host read of a stand-in (``print(h)``, ``h.item()``) computes it first (``Unevaluated.owner.resolve``).

A value is computed at these named points only: a host read, an op or factory Python calls off the traced
path (``realise``), and the end of the call for stand-ins Python kept (``finish``). Other uses of a
stand-in's ``data`` raise an error naming the node.

**Deoptimisation.** When Python does something the trace did not (another op, another tensor, a
factory the trace does not have, a read of a value made with random draws in the middle of a piece), the
call continues eagerly from there: the ops of the current piece that Python already called run now, in
Python's order (the listener kept each call's ``run``), so random draws happen as in eager mode. A
stand-in of an already-run piece that Python reads later is computed by re-running that piece's recorded
ops with the random state as it was when the piece ran, so dropout masks agree with the compiled ones.

Limits: a value from a fused kernel has the fused node as ``grad_fn``; a view handed out gets its own
version counter; an in-place change Python makes, off the traced path, to a tensor that an already-called
op of the current piece read, or to a stand-in, is an error (naming the value), never a wrong value.
"""
import math
import weakref
from types import SimpleNamespace

from ..autograd.grad_mode import is_grad_enabled, set_grad_enabled
from ..tensor import Tensor
from .capture import Capture, tensors_of
from .ir import Graph, Node, is_random
from .piecewise import can_vary


class Unevaluated:
    """``Tensor.array`` of a stand-in: what the trace knows of ``node``'s value, without the value (and the
    stand-in's ``grad_fn`` when it requires grad, so that ``is_leaf`` is False until ``fill``)."""
    __slots__ = ("node", "owner")   # owner: who computes it (the Call, a PieceRun, or _Broken)
    base = None                     # shares no storage (as in whole-graph replay: views get their own counter)

    def __init__(self, node, owner):
        self.node, self.owner = node, owner

    shape = property(lambda self: self.node.meta["shape"])
    dtype = property(lambda self: self.node.meta["dtype"])
    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))
    itemsize = property(lambda self: self.dtype.itemsize)
    nbytes = property(lambda self: self.size * self.itemsize)
    flags = property(lambda self: SimpleNamespace(c_contiguous=self.node.meta["contiguous"], f_contiguous=False,
                                                  writeable=True))   # the layout traced: contiguous() reads it

    def __getattr__(self, name):
        n = self.node
        raise RuntimeError(f"mg.compile: {n.name} ({n.describe()}, {n.meta.get('where')}) is a value piecewise "
                           f"replay computes later, in a compiled piece: a host read (.numpy(), .item(), print) "
                           f"can read it, its .array can't be used (.array.{name}: NumPy on it, or an in-place "
                           f"change off the traced path). Run this function eagerly if it needs that")

    def __repr__(self):
        return f"<unevaluated {self.node.name}>"


def stand_in(node, owner):
    t = Tensor._make(Unevaluated(node, owner), node.meta["device"], node.meta["requires_grad"])
    t.grad_fn = t.array if t.requires_grad else None
    return t


def unevaluated(t):
    return type(t.array) is Unevaluated


def fill(t, r):
    """Make the stand-in ``t`` the tensor ``r`` (same storage, history and version counter)."""
    t.array, t.requires_grad, t.grad_fn, t._version_counter = r.array, r.requires_grad, r.grad_fn, r._version_counter


def realise(args, kwargs):
    """Compute every stand-in among a call's arguments (before it runs eagerly)."""
    for a in tensors_of((args, kwargs)):
        if unevaluated(a):
            a.array.owner.resolve(a)


def _random_state(generators):
    return [(g, g.get_state()) for g in generators]


class PieceRun:
    """A compiled piece that ran: its inputs and random state, to compute a fused-away value on demand."""
    __slots__ = ("piece", "unfused", "inputs", "states", "handed", "call")

    def __init__(self, piece, inputs, states, call):
        self.piece, self.inputs, self.states, self.handed, self.call = piece, inputs, states, [], call
        self.unfused = piece.unfused   # the piece as built when it ran (a dynamic scalar may rebuild it)

    def resolve(self, _=None):
        """Re-run the piece's unfused ops with the random state it ran with; fill every stand-in left."""
        piece, now = self.piece, _random_state(self.piece.generators)
        for g, state in self.states:
            g.set_state(state)
        try:
            with set_grad_enabled(piece.grad):   # every value of the piece returned
                values = self.call.quietly(Graph(self.unfused.nodes, tuple(self.unfused.calls())), self.inputs)
        finally:
            for g, state in now:
                g.set_state(state)
        for ref in self.handed:
            t = ref()
            if t is not None and unevaluated(t) and t.array.owner is self:
                fill(t, values[piece.pos[t.array.node]])
        self.handed, self.inputs = [], None

    def alive(self):
        return any((t := ref()) is not None and unevaluated(t) for ref in self.handed)


class _Broken:
    @staticmethod
    def resolve(t):
        raise RuntimeError(f"mg.compile: the value of {t.array.node.name} is unavailable: the compiled call "
                           f"that made it raised an exception")


class Call(Capture):
    """One piecewise-replayed call of a function (``run``)."""
    outermost = True   # wrappers outside ours would see stand-ins

    def __init__(self, plan, tensors):
        self.plan = plan
        self.env = dict(zip(plan.placeholders, tensors))   # trace node -> the tensor Python holds for it
        self.scalars = {}     # (node, arg index) -> the number Python passed this call
        self.i = 0            # the next expected step (index into plan.steps)
        self.pending = []     # (node, stand-in, run) of the current piece, not computed yet
        self.watch = []       # (tensor, version, node) read by those calls: no in-place change in between
        self.runs = []
        self.deopted = None   # why the call went eager, once it did

    def expected(self):
        """The step Python is expected to call next (None past the last)."""
        return self.plan.steps[self.i] if self.i < len(self.plan.steps) else None

    # --- the listeners -----------------------------------------------------------------------------
    def on_op(self, op, args, kwargs, run):
        if not self.mine():
            return run()
        if self.deopted is None:
            node = self.expected()
            why = f"{op.name} called after the last traced op" if node is None else \
                self._match(node, op, args, kwargs)
            if why is None:
                self.i += 1
                if node in self.plan.python_runs:
                    return self._python_runs(node, run, args, kwargs)
                return self._hand_out(node, run, args)
            self.deopt(why)
        realise(args, kwargs)
        return run()

    def on_call(self, fn, args, kwargs, run):
        if not self.mine():
            return run()
        if self.deopted is None:
            node = self.expected()
            if node is not None and node.kind == "call_function" and node.target is fn:
                why = self._match(node, fn, args, kwargs)
                if why is None:
                    self.i += 1
                    return self._python_runs(node, run, args, kwargs)
                self.deopt(why)
            elif fn in self.plan.transparent:
                return run()   # its ops are matched one by one
            else:
                self.deopt(f"Python called {fn.__name__} where the trace has "
                           f"{'nothing more' if node is None else node.op_name} ({_where(node)})")
        realise(args, kwargs)
        return run()

    def on_read(self, t, what):
        if self.mine() and unevaluated(t):
            t.array.owner.resolve(t)

    # --- matching ------------------------------------------------------------------------------------
    def _match(self, node, target, args, kwargs):
        """None when the call is the expected node, else why not."""
        name, where = getattr(target, "name", None) or target.__name__, _where(node)
        if target is not node.target:
            return f"Python called {name} where the trace has {node.op_name} ({where})"
        if is_grad_enabled() != node.meta["grad"] or len(args) != len(node.args) or kwargs.keys() != node.kwargs.keys():
            return f"{name} called with other arguments or grad mode than traced ({where})"
        if not all(self._same(node.kwargs[k], a) for k, a in kwargs.items()):
            return f"{name} called with other options than traced ({where})"
        dynamic, varied = self.plan.dynamic.get(node, ()), []
        for i, (e, a) in enumerate(zip(node.args, args)):
            if i in dynamic:
                if type(a) is not type(e):
                    return f"{name}: argument {i} is a {type(a).__name__}, traced as a {type(e).__name__}"
                self.scalars[(node, i)] = a
            elif not self._same(e, a):
                if not can_vary(e, a):
                    return f"{name} called with other tensors or values than traced ({where})"
                if node not in self.plan.python_runs:   # (a node Python runs takes Python's number as it is)
                    varied.append(i)
        for i in varied:   # a number operand changed: it becomes an input of the piece's graph
            self.plan.make_dynamic(node, i)
            self.scalars[(node, i)] = args[i]
        return None

    def _same(self, e, a):
        """Python's argument ``a`` is the traced ``e``: the tensor handed out for node ``e`` (or the one a
        ``get_attr`` holds), or an equal value (containers item by item, arrays whole, NaN equal to NaN)."""
        if type(e) is Node:
            return isinstance(a, Tensor) and (self.env.get(e) is a if e in self.env else
                                              e.kind == "get_attr" and e.target is a)
        if isinstance(a, Tensor) or type(e) is not type(a):
            return False
        if isinstance(e, (tuple, list)):
            return len(e) == len(a) and all(self._same(x, y) for x, y in zip(e, a))
        if isinstance(e, dict):
            return e.keys() == a.keys() and all(self._same(e[k], a[k]) for k in e)
        try:
            return bool(e == a) or (e != e and a != a)
        except (TypeError, ValueError):   # arrays: compared whole
            try:
                return e.shape == a.shape and e.dtype == a.dtype and bool((e == a).all())
            except AttributeError:
                return e is a

    # --- what Python gets ----------------------------------------------------------------------------
    def _python_runs(self, node, run, args, kwargs):
        realise(args, kwargs)
        out = self.env[node] = self.quietly(run)
        for child in self.plan.children.get(node, ()):
            self.env[child] = out[child.args[1]]
        if isinstance(out, Tensor) and tuple(out.shape) != node.meta["shape"]:
            self.deopt(f"{node.op_name} made a tensor of shape {tuple(out.shape)}, traced as "
                       f"{node.meta['shape']} ({_where(node)})")
        return out

    def _hand_out(self, node, run, args):
        piece = self.plan.piece_of[node]
        if node is not piece.last:
            t = self.env[node] = stand_in(node, self)
            self.pending.append((node, t, run))
            self.watch += [(a, a._version, node) for a in args if isinstance(a, Tensor) and not unevaluated(a)]
            return t
        for a, version, reader in self.watch:
            if a._version != version:   # Python wrote into it off the traced path
                raise RuntimeError(f"mg.compile: a tensor of shape {tuple(a.shape)} was changed in place after "
                                   f"{reader.name} ({_where(reader)}) read it; piecewise replay computes that "
                                   f"op later, with the piece ending at {node.name}. Clone the tensor before "
                                   f"changing it, or run this function eagerly")
        inputs = [self.env[s] if isinstance(s, Node) else self.scalars[s] for s in piece.sources]
        pr = PieceRun(piece, inputs, _random_state(piece.generators), self)
        with set_grad_enabled(piece.grad):
            outs = self.quietly(piece.graph, inputs)
        self.runs.append(pr)
        pending, self.pending, self.watch = self.pending, [], []
        for n, t, _ in pending:
            if not unevaluated(t):   # Python read it early: it keeps the eager value it saw
                continue
            if n in piece.out_index:
                fill(t, outs[piece.out_index[n]])
            else:   # fused away: computed if Python reads it (PieceRun.resolve)
                t.array.owner = pr
                pr.handed.append(weakref.ref(t))
        if node in piece.out_index:
            t = self.env[node] = outs[piece.out_index[node]]
        else:
            t = self.env[node] = stand_in(node, pr)
            pr.handed.append(weakref.ref(t))
        return t

    # --- computing stand-ins of the current piece, deoptimisation ------------------------------------
    def resolve(self, t):
        """Python reads a value in the middle of a piece (a ``print`` on a path the trace did not see):
        compute it now, eagerly, from the calls Python made for it; the piece still runs compiled. A random
        op among them would draw twice: the call deoptimises instead."""
        needed, todo = {t.array.node}, [t.array.node]
        while todo:
            for a in todo.pop().inputs():
                s = self.env.get(a)
                if a not in needed and s is not None and unevaluated(s) and s.array.owner is self:
                    needed.add(a)
                    todo.append(a)
        calls = [(n, s, run) for n, s, run in self.pending if n in needed]
        if any(is_random(n) for n, _, _ in calls):
            return self.deopt(f"Python read {t.array.node.name} ({_where(t.array.node)}), a value made with random "
                              f"draws that the trace keeps inside a compiled graph")
        self._run_eagerly(calls)

    def deopt(self, why):
        if self.deopted is None:
            self.deopted = why
            pending, self.pending, self.watch = self.pending, [], []
            self._run_eagerly(pending)   # the calls Python already made, run now, in its order

    @staticmethod
    def _run_eagerly(calls):
        for node, t, run in calls:
            if unevaluated(t):
                with set_grad_enabled(node.meta["grad"]):
                    fill(t, run())

    def finish(self, ok):
        """After the function returned (``ok``) or raised: no stand-in may outlive the call unresolved."""
        if ok and self.deopted is None and self.i < len(self.plan.steps):
            self.deopt("the function returned before calling every traced op")
        for _, t, _ in self.pending:
            if unevaluated(t):
                t.array.owner = _Broken
        self.pending, runs, self.runs = [], self.runs, []
        self.env.clear()
        for pr in runs if ok else ():
            if pr.alive():
                pr.resolve()


def _where(node):
    return node.meta.get("where", "") if node is not None else ""
