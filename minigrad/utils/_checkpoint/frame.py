"""One checkpointed call: a *frame*. It keeps the call's inputs, not its activations, and recomputes them.

The forward runs ``fn`` inside ``saved_tensors_hooks(frame.pack, frame.unpack)``: every array an op saves
for backward is replaced by a small ``_Handle`` (its position in the order of saves, and its shape and
dtype). The graph itself is the ordinary one, so ``autograd.grad``, hooks and tuple outputs need nothing
special. The first ``unpack`` in backward reruns ``fn`` on the kept inputs (RNG states restored, grad
on), collecting the arrays saved in the same order, and each handle takes its array from there (once:
an unpacked array is dropped from the frame, so recomputed activations die with the backward of their
node).

Inputs are themselves packed with the hooks in force around the call: a checkpoint nested in another
keeps its inputs as handles of the outer one, so the outer region's activations are not pinned.

Random numbers: the frame notes the state of the default generator when it starts, and of every other
``Generator`` before its first draw in the region (``random.watch_generators``), and restores them for
the recomputation.

A selective policy needs a forward wrapper (``extensions.forward_wrappers``, this thread, while a frame
with a policy runs): it numbers the ops of the region; a kept op runs normally in the forward and its
output is remembered; during the recomputation it is replayed, not run. Its saves that are its inputs
stay handles (the ops before it recompute them); any other (its output, a mask) is kept as it is.
Without a policy nothing is registered but the saved-tensor hooks: a frame costs the same whatever the
number of segments it is one of.
"""
import contextlib
import contextvars

from ...autograd import extensions, grad_mode
from ...backend import get_backend
from ...errors import AutogradError, InplaceModificationError
from ...random import default_generator, watch_generators
from ...tensor import Tensor
from . import selective


class RecomputationError(AutogradError):
    """The recomputation of a checkpointed region did not reproduce its forward."""


_active = contextvars.ContextVar("minigrad.checkpoint.frames", default=())  # this thread's, innermost last


class _Handle:
    """What an op's ctx holds instead of a saved array: the frame and the save's position in it."""
    __slots__ = ("frame", "index")

    def __init__(self, frame, index):
        self.frame, self.index = frame, index
        frame.wanted.add(index)

    def __del__(self):  # the node was freed (or never recorded): its recomputed array is not needed
        frame = self.frame
        frame.wanted.discard(self.index)
        if frame.recomputed:
            frame.recomputed.pop(self.index, None)


class _Kept:
    """A save the selective policy keeps as it is (``unpack`` returns the array)."""
    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array


class _Input:
    """One tensor argument: its data (packed by the hooks around the call), metadata and version."""
    __slots__ = ("packed", "unpack", "requires_grad", "device", "vc", "version")

    def __init__(self, t):
        hooks = extensions.current_saved_tensors_hooks()
        if hooks is not None:
            pack, self.unpack = hooks
            self.packed = pack(t.array)
        else:
            self.packed, self.unpack = t.array, None
        self.requires_grad, self.device = t.requires_grad, t.device
        self.vc, self.version = t._version_counter, t._version_counter.value

    def rebuild(self):
        data = self.packed if self.unpack is None else self.unpack(self.packed)
        t = Tensor._make(data, self.device, self.requires_grad)
        t._version_counter = self.vc
        return t


class Frame:
    """The state of one ``checkpoint(fn, *args)`` call; see the module docstring."""

    def __init__(self, fn, args, kwargs, preserve_rng_state, policy=None, allow_mutation=False,
                 recompute_ctx=None):
        self.fn, self.kwargs = fn, kwargs
        self.recompute_ctx = recompute_ctx or contextlib.nullcontext()
        self.args = [_Input(a) if isinstance(a, Tensor) else a for a in args]
        self.device = extensions.device_of(args)
        self.preserve_rng = preserve_rng_state
        self.rng = {default_generator: default_generator.get_state()} if preserve_rng_state else {}
        self.policy, self.allow_mutation = policy, allow_mutation
        self.meta = []          # (shape, dtype) of each save replaced by a handle, in order
        self.wanted = set()     # indices of the live handles (a save a node will still read)
        self.kept = {}          # op number -> (output array, requires_grad, device, vc, version, op name)
        self.recomputed = {}    # index -> recomputed array, until its handle unpacks it
        self.recomputing = False
        self.ops = 0            # ops seen by the current pass (forward or recomputation)
        self.keeping = None     # (op number, its input arrays) inside an op the policy keeps
        self.kept_inputs = {}   # op number -> [(handle index, input position)] of its saves
        self.saves = 0          # saves seen by the current recomputation

    # --- the forward ------------------------------------------------------------------------------
    def run_forward(self, args):
        watch = watch_generators(self.note_generator) if self.preserve_rng else contextlib.nullcontext()
        with _running(self), watch, extensions.saved_tensors_hooks(self.pack, self.unpack):
            return self.fn(*args, **self.kwargs)

    def note_generator(self, g):
        if g not in self.rng:
            self.rng[g] = g.get_state()     # before its first use inside the region

    def pack(self, array):
        if self.recomputing:                # a save of the recomputation: keep it if a handle wants it
            i = self.saves
            self.saves += 1
            if i in self.wanted:
                self.recomputed[i] = self._check_meta(i, array)
            return None
        if self.keeping is not None:       # inside an op the policy keeps (its output is remembered)
            for pos, a in enumerate(self.keeping[1]):
                if a is array:              # one of its inputs: recomputed by the ops before it
                    self.kept_inputs.setdefault(self.keeping[0], []).append((len(self.meta), pos))
                    break
            else:
                return _Kept(array)         # its output or an intermediate (a mask): kept as it is
        handle = _Handle(self, len(self.meta))
        self.meta.append((array.shape, array.dtype))
        return handle

    def unpack(self, packed):
        if type(packed) is _Kept:
            return packed.array
        if packed is None:
            raise RecomputationError("checkpoint: a tensor saved during recomputation was read by a "
                                     "backward; recomputed graphs are not differentiable")
        i = packed.index
        if i not in self.recomputed:
            self.recompute()
        try:
            return self.recomputed.pop(i)
        except KeyError:
            raise RecomputationError(f"checkpoint: saved tensor {i} was not reproduced by the "
                                     f"recomputation") from None

    # --- the recomputation ------------------------------------------------------------------------
    def recompute(self):
        """Rerun ``fn`` on the kept inputs, filling ``recomputed`` for every live handle."""
        inputs = [self._rebuild(i, a) for i, a in enumerate(self.args)]
        self._check_kept()
        rng_now = {g: g.get_state() for g in self.rng}
        for g, state in self.rng.items():
            g.set_state(state)
        self.recomputing, self.ops, self.saves = True, 0, 0
        try:
            with self.recompute_ctx, _running(self), grad_mode.enable_grad(), \
                    extensions.saved_tensors_hooks(self.pack, self.unpack):
                self.fn(*inputs, **self.kwargs)
        finally:
            self.recomputing = False
            for g, state in rng_now.items():
                g.set_state(state)
        if self.saves != len(self.meta):
            self.recomputed.clear()
            raise RecomputationError(
                f"checkpoint: the recomputation of {_name(self.fn)} saved {self.saves} tensors for backward "
                f"but its forward saved {len(self.meta)}: the function must do the same ops both times "
                f"(no data-dependent control flow on values that change, no global state)")

    def _rebuild(self, i, a):
        if not isinstance(a, _Input):
            return a
        if a.vc.value != a.version:
            raise InplaceModificationError(
                f"checkpoint: input {i} of {_name(self.fn)} was modified in place after the forward "
                f"(version {a.vc.value}, expected {a.version}); the recomputation would use the new values "
                f"and give a wrong gradient. Clone the input before modifying it.")
        return a.rebuild()

    def _check_meta(self, i, array):
        shape, dtype = self.meta[i] if i < len(self.meta) else (None, None)
        if array.shape != shape or array.dtype != dtype:
            raise RecomputationError(
                f"checkpoint: recomputed tensor {i} of {_name(self.fn)} has shape {tuple(array.shape)} and "
                f"dtype {array.dtype}, but the forward saved shape {shape} and dtype {dtype}: the function "
                f"is not deterministic (or depends on state that changed)")
        # into the memory pool when it is on (an op's result is adopted after the op; a save, not)
        return array if self.device is None else get_backend(self.device).adopt(array)

    def _check_kept(self):
        if self.allow_mutation:
            return
        for data, _, _, vc, version, name in self.kept.values():
            if vc.value != version:
                raise InplaceModificationError(
                    f"checkpoint: the output of {name}, kept by the selective policy, was modified in place "
                    f"after the forward; pass allow_cache_entry_mutation=True to accept that")

    # --- every op of the region (the forward wrapper) ---------------------------------------------
    def on_op(self, op, args, kwargs, run):
        n = self.ops
        self.ops += 1
        if self.recomputing:
            kept = self.kept.get(n)
            if kept is None:
                return run()
            for index, pos in self.kept_inputs.get(n, ()):   # its saved inputs, as recomputed now
                self.saves += 1
                if index in self.wanted:
                    self.recomputed[index] = args[pos].array
            t = Tensor._make(kept[0], kept[2], kept[1])   # replayed, not run (a wrapper may skip run)
            t._version_counter = kept[3]
            return t
        if self.policy is None or not selective.decide(self.policy, op, args, kwargs):
            return run()
        outer = self.keeping
        self.keeping = (n, [a.array if isinstance(a, Tensor) else a for a in args])
        try:
            out = run()
        finally:
            self.keeping = outer
        self.kept[n] = (out.array, out.requires_grad, out.device, out._version_counter, out._version_counter.value, op.name)
        return out


def _region_wrapper(op, args, kwargs, run):
    frames = _active.get()
    return frames[-1].on_op(op, args, kwargs, run) if frames else run()


class _running:
    """Push a frame (this thread's) for the duration of a pass; a frame with a selective policy needs the
    forward wrapper, registered for this thread while such a frame runs."""

    def __init__(self, frame):
        self.frame = frame

    def __enter__(self):
        frames = _active.get()
        self.token = _active.set(frames + (self.frame,))
        self.handle = None
        if self.frame.policy is not None and not any(f.policy is not None for f in frames):
            self.handle = extensions.forward_wrappers.add(_region_wrapper, "checkpoint")

    def __exit__(self, *exc):
        _active.reset(self.token)
        if self.handle is not None:
            self.handle.remove()
        return False


def _name(fn):
    return getattr(fn, "__qualname__", None) or type(fn).__name__
