"""Piecewise replay of one call: Python runs the function again, the tensors come from compiled pieces.

A forward wrapper (no ``sys.setprofile``) follows Python's calls of ``Function.apply`` against the
trace's ``call_op`` nodes, in order. A call that matches the expected node (same op class, the very
tensors handed out or bound for its input nodes, equal options) does not run: Python gets a **stand-in**,
a Tensor with the right shape, dtype, device and requires_grad whose ``data`` is a ``Pending`` sentinel.
When Python calls the last op of a piece (``piecewise.py``), the piece's compiled graph runs on the real
inputs and every stand-in of a value that leaves the piece becomes that real tensor (its slots are
overwritten, so Python's references stay valid and autograd runs through the compiled graph). Values the
fused graph never made stay stand-ins.

A value Python reads in the middle of a piece (library code validating ``target.data``, a ``print`` on a
path the trace did not see) is computed right then, eagerly, from the calls Python made for it.

**Deoptimisation.** When Python does something the trace did not (calls another op, passes another
tensor, reads a value made with random draws in the middle of a piece), the call falls back to eager from
there: the ops of the current piece that Python already called run now, eagerly (the wrapper kept each
call's ``run``), in Python's order, so random draws happen as in eager mode; the rest runs eagerly. A stand-in of
an already-compiled piece that Python reads later (only on a path the trace did not see) is computed by
re-running that piece's recorded ops with the random state as it was when the piece ran, so dropout masks
agree with the ones the compiled graph drew. Stand-ins still alive when the call returns (stored
somewhere) are computed the same way before the call returns.

Limits: a value from a fused kernel has the fused node as ``grad_fn`` (``print`` shows
``grad_fn=<FusedElementwise>``); a view handed out gets its own version counter (as in whole-graph replay);
an in-place change Python makes, off the traced path, to a tensor that an already-called op of the current
piece read is an error (that op runs later, with its piece), never a silently wrong value.
"""
import weakref

import numpy as np

from ..autograd import grad_mode
from ..autograd.function import VersionCounter
from ..autograd.grad_mode import set_grad_enabled
from ..tensor import Tensor
from .ir import Node, flatten
from .piecewise import can_vary

_quiet = [0]   # > 0 while a compiled piece or a re-run executes: the wrapper lets those ops through
_grad = grad_mode._state
_MISSING = object()
_PLAIN = frozenset((int, float, bool, str, type(None)))   # a True == is a match (else _same decides)


class Pending:
    """``Tensor.data`` of a stand-in: answers the metadata Python asks on the traced path (shape, dtype,
    contiguity); anything else computes the value (deoptimising the call if needed) and delegates to it."""

    __slots__ = ("node", "owner", "value", "grad_fn")

    def __init__(self, node, owner):
        self.node, self.owner, self.value, self.grad_fn = node, owner, None, None

    shape = property(lambda self: self.node.meta["shape"])
    dtype = property(lambda self: self.node.meta["dtype"])
    ndim = property(lambda self: len(self.node.meta["shape"]))
    size = property(lambda self: int(np.prod(self.node.meta["shape"], dtype=np.int64)))
    itemsize = property(lambda self: self.node.meta["dtype"].itemsize)
    nbytes = property(lambda self: self.size * self.itemsize)
    base = None          # a stand-in shares no storage (as replayed graphs: views get their own counter)
    flags = property(lambda self: _Flags(self.node.meta.get("contiguous", True)))

    def get(self):
        if self.value is None:
            self.owner.resolve(self)
        return self.value

    def __getattr__(self, name):
        return getattr(self.get(), name)

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.get(), dtype)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        inputs = [real(x) for x in inputs]
        if "out" in kwargs:
            kwargs["out"] = tuple(real(x) for x in kwargs["out"])
        return getattr(ufunc, method)(*inputs, **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return func(*[real(a) for a in args], **{k: real(v) for k, v in kwargs.items()})

    def __repr__(self):
        return f"<pending {self.node.name}>" if self.value is None else repr(self.value)


class _Flags:
    """The memory layout the value had when traced (``contiguous()`` decides on it whether to copy)."""
    __slots__ = ("c_contiguous",)
    f_contiguous, writeable = False, True

    def __init__(self, c_contiguous):
        self.c_contiguous = c_contiguous


def _delegate(name):
    return lambda self, *args: getattr(self.get(), name)(*args)


for _name in ("add radd sub rsub mul rmul truediv rtruediv floordiv rfloordiv mod pow rpow matmul rmatmul neg "
              "pos abs invert lt le gt ge eq ne and rand or ror xor rxor getitem setitem len iter bool float "
              "int index complex contains").split():
    setattr(Pending, f"__{_name}__", _delegate(f"__{_name}__"))


def real(x):
    return x.get() if type(x) is Pending else x


class _PendingGradFn:
    """``grad_fn`` of a stand-in that requires grad: ``is_leaf`` is False; touching it computes the value."""
    __slots__ = ("_pending",)

    def __init__(self, pending):
        object.__setattr__(self, "_pending", pending)

    def __getattr__(self, name):
        p = self._pending
        p.get()
        return getattr(p.grad_fn, name)

    def __setattr__(self, name, value):
        p = self._pending
        p.get()
        setattr(p.grad_fn, name, value)


def stand_in(node, owner):
    m = node.meta
    t = object.__new__(Tensor)
    t.data = p = Pending(node, owner)
    t.device, t.requires_grad, t.grad = m["device"], m["requires_grad"], None
    t.grad_fn = _PendingGradFn(p) if m["requires_grad"] else None
    t._version_counter = VersionCounter()
    return t


def fill(t, r):
    """Make the stand-in ``t`` the tensor ``r`` (same storage, history and version counter)."""
    p = t.data
    t.data, t.requires_grad, t.grad_fn, t._version_counter = r.data, r.requires_grad, r.grad_fn, r._version_counter
    if type(p) is Pending:
        p.value, p.grad_fn = r.data, r.grad_fn


def realise(args, kwargs):
    """Compute every stand-in among an op's arguments (before it runs eagerly)."""
    for a in flatten((args, kwargs)):
        if isinstance(a, Tensor) and type(a.data) is Pending:
            p = a.data
            p.get()
            if a.data is p:   # a tensor made from a stand-in's data (detach of a stand-in)
                a.data = p.value


def _states(generators):
    return [(g, g.get_state()) for g in generators]


def _restore(states):
    for g, s in states:
        g.set_state(s)


class PieceRun:
    """A compiled piece that ran: its inputs and random state, to compute a fused-away value on demand."""
    __slots__ = ("piece", "build", "inputs", "states", "handed")

    def __init__(self, piece, inputs, states):
        self.piece, self.build, self.inputs, self.states, self.handed = piece, piece.build, inputs, states, []

    def resolve(self, pending):
        piece = self.piece
        now = _states(piece.generators)
        _restore(self.states)
        _quiet[0] += 1
        try:
            with set_grad_enabled(piece.grad):
                values = self.build.eager()(self.inputs)
        finally:
            _quiet[0] -= 1
            _restore(now)
        for ref in self.handed:
            t = ref()
            if t is not None and type(t.data) is Pending and t.data.owner is self:
                fill(t, values[piece.pos[t.data.node]])
        if pending is not None and pending.value is None:
            r = values[piece.pos[pending.node]]
            pending.value, pending.grad_fn = r.data, r.grad_fn
        self.handed, self.inputs = [], None

    def alive(self):
        return any((t := ref()) is not None and type(t.data) is Pending for ref in self.handed)


class _Broken:
    @staticmethod
    def resolve(pending):
        raise RuntimeError(f"mg.compile: the value of {pending.node.name} is unavailable: the compiled call "
                           f"that made it raised an exception")


class Call:
    """The state of one piecewise-replayed call; ``wrap`` is its forward wrapper."""

    def __init__(self, plan, tensors):
        self.plan = plan
        self.env = dict(zip(plan.placeholders, tensors))   # trace node -> the tensor Python holds for it
        self.scalars = {}     # (node, arg index) -> the number Python passed this call
        self.i = 0            # the next expected op (index into plan.ops)
        self.pending = []     # (node, stand-in, run) of the current piece, not computed yet
        self.watch = []       # (tensor, version, node) read by those calls: no in-place change in between
        self.runs = []
        self.deopted = None   # why the call went eager, once it did

    # --- the forward wrapper -----------------------------------------------------------------------
    def wrap(self, op, args, kwargs, run):
        if _quiet[0]:
            return run()
        if self.deopted is None:
            ops = self.plan.ops
            if self.i >= len(ops):
                self.deopt(f"{op.name} called after the last traced op")
            else:
                node = ops[self.i]
                why = self._match(node, op, args, kwargs)
                if why is None:
                    self.i += 1
                    return self._hand_out(node, run, args)
                self.deopt(why)
        realise(args, kwargs)
        return run()

    def _match(self, node, op, args, kwargs):
        """None when the call is the expected node, else why not. The loops inline the common cases (a
        tensor handed out for the input node, an equal plain option): this runs for every op Python calls."""
        if op is not node.target:
            return f"Python called {op.name} where the trace has {node.op_name} ({node.meta.get('where')})"
        expected, env = node.kwargs, self.env
        if _grad.enabled != node.meta["grad"] or len(args) != len(node.args) or len(kwargs) != len(expected):
            return f"{op.name} called with other arguments or grad mode than traced ({node.meta.get('where')})"
        for k, a in kwargs.items():
            e = expected.get(k, _MISSING)
            if not ((type(e) is type(a) and type(e) in _PLAIN and e == a) or
                    (type(e) is Node and env.get(e, _MISSING) is a) or (e is not _MISSING and self._same(e, a))):
                return f"{op.name} called with other options than traced ({node.meta.get('where')})"
        dynamic = self.plan.dynamic.get(node)
        varied = None
        for i, e in enumerate(node.args):
            a = args[i]
            if dynamic is not None and i in dynamic:
                if type(a) is not type(e):
                    return f"{op.name}: argument {i} is a {type(a).__name__}, traced as a {type(e).__name__}"
                self.scalars[(node, i)] = a
            elif (type(e) is Node and env.get(e, _MISSING) is a) or \
                    (type(e) is type(a) and type(e) in _PLAIN and e == a) or self._same(e, a):
                continue
            elif can_vary(e, a):
                varied = (varied or []) + [i]
            else:
                return f"{op.name} called with other tensors or values than traced ({node.meta.get('where')})"
        for i in varied or ():   # a number operand changed: it becomes an input of the piece's graph
            self.plan.make_dynamic(node, i)
            self.scalars[(node, i)] = args[i]
        return None

    def _same(self, e, a):
        if isinstance(e, Node):
            if not isinstance(a, Tensor):
                return False
            t = self.env.get(e)
            if t is not None:
                return t is a
            if e.kind == "get_attr":
                return e.target is a
            if e.kind == "call_function" and type(a.data) is not Pending:   # Python made it: bind it
                m = e.meta
                if a.data.shape == m["shape"] and a.data.dtype == m["dtype"] and a.device == m["device"]:
                    self.env[e] = a
                    return True
            return False
        if isinstance(a, Tensor) or type(e) is not type(a):
            return False
        if isinstance(e, (tuple, list)):
            return len(e) == len(a) and all(self._same(x, y) for x, y in zip(e, a))
        if isinstance(e, dict):
            return e.keys() == a.keys() and all(self._same(e[k], a[k]) for k in e)
        if isinstance(e, np.ndarray):
            return e.shape == a.shape and e.dtype == a.dtype and bool(np.array_equal(e, a))
        try:
            return bool(e == a) or (e != e and a != a)
        except (TypeError, ValueError):
            return e is a

    def _hand_out(self, node, run, args):
        piece = self.plan.piece_of[node]
        if node is not piece.last:
            t = self.env[node] = stand_in(node, self)
            self.pending.append((node, t, run))
            self.watch += [(a, a._version_counter.value, node) for a in args
                           if isinstance(a, Tensor) and type(a.data) is not Pending]
            return t
        for a, version, reader in self.watch:
            if a._version_counter.value != version:   # Python wrote into it off the traced path
                raise RuntimeError(f"mg.compile: a tensor of shape {tuple(a.shape)} was changed in place after "
                                   f"{reader.name} ({reader.meta.get('where')}) read it; piecewise replay "
                                   f"computes that op later, with the piece ending at {node.name}. Clone the "
                                   f"tensor before changing it, or run this function eagerly")
        self.watch = []
        inputs = [self.env[s] if isinstance(s, Node) else self.scalars[s] for s in piece.build.sources]
        states = _states(piece.generators)
        _quiet[0] += 1
        try:
            with set_grad_enabled(piece.grad):
                outs = piece.graph(inputs)
        finally:
            _quiet[0] -= 1
        pr = PieceRun(piece, inputs, states)
        self.runs.append(pr)
        pending, self.pending = self.pending, []
        for n, t, _ in pending:
            k = piece.out_index.get(n)
            if type(t.data) is not Pending:   # Python read it early: it keeps the eager value it saw
                continue
            if k is not None:
                fill(t, outs[k])
            else:
                t.data.owner = pr
                pr.handed.append(weakref.ref(t))
        k = piece.out_index.get(node)
        if k is not None:
            t = outs[k]
        else:
            t = stand_in(node, pr)
            pr.handed.append(weakref.ref(t))
        self.env[node] = t
        return t

    # --- deoptimisation ----------------------------------------------------------------------------
    def resolve(self, pending):
        """Python reads a value in the middle of a piece (library code validating ``t.data``, a ``print`` on
        a path the trace did not see): compute it now, eagerly, from the calls Python made for it; the piece
        still runs compiled. A random op among them would draw twice: the call deoptimises instead."""
        node = pending.node
        needed, todo = {node}, [node]
        while todo:
            for a in todo.pop().inputs():
                t = self.env.get(a)
                if a not in needed and t is not None and type(t.data) is Pending and t.data.owner is self:
                    needed.add(a)
                    todo.append(a)
        calls = [(n, t, run) for n, t, run in self.pending if n in needed]
        if any("generator" in n.kwargs for n, _, _ in calls):
            self.deopt(f"Python read {node.name} ({node.meta.get('where', '')}), a value made with random "
                       f"draws that the trace keeps inside a compiled graph")
            return
        for n, t, run in calls:
            with set_grad_enabled(n.meta["grad"]):
                fill(t, run())

    def deopt(self, why):
        if self.deopted is not None:
            return
        self.deopted = why
        pending, self.pending, self.watch = self.pending, [], []
        for node, t, run in pending:   # the calls Python already made, run now, in its order
            if type(t.data) is Pending:
                with set_grad_enabled(node.meta["grad"]):
                    fill(t, run())

    def finish(self, ok):
        """After the function returned (``ok``) or raised: no stand-in may outlive the call unresolved."""
        if ok and self.deopted is None and self.i < len(self.plan.ops):
            self.deopt("the function returned before calling every traced op")
        for _, t, _ in self.pending:
            if type(t.data) is Pending:
                t.data.owner = _Broken
        self.pending, runs, self.runs = [], self.runs, []
        self.env.clear()
        if ok:
            for pr in runs:
                if pr.alive():
                    pr.resolve(None)
