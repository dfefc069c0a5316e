"""Extension points: where features plug into ``Function.apply`` and the backward engine.

The core never imports the features that use these (amp, memory, compile, profiler, distributed); each
feature registers a callback here. When nothing is registered, ``Function.apply`` is the plain version
(it is swapped for one that runs the extensions while any forward extension is registered: see
``on_forward_change``) and the engine pays one flag check per node (``state.backward``), so per-op
overhead does not grow.

====================  =============================================  =====================================
point                 signature                                      used by
====================  =============================================  =====================================
``input_casts``       ``fn(op, args, kwargs) -> (args, kwargs)``     autocast: casts inputs per op
``saved_tensors_hooks``  ``pack(array) -> obj``, ``unpack(obj) -> array``  checkpointing, offloading
``forward_wrappers``  ``fn(op, args, kwargs, run) -> Tensor``        graph capture records, the profiler
                                                                     times, the memory pool labels and
                                                                     adopts, anomaly mode checks,
                                                                     checkpointing numbers ops and replays
``backward_wrappers`` ``fn(node, grad, run) -> input grads``         the same, for each node's backward
``outside_apply_wrappers``  ``fn(function, args, kwargs, run) -> result``  graph capture records, and
                      piecewise replay runs, the calls of core functions marked ``@outside_apply`` (below)
``host_reads``        ``fn(tensor, what) -> None``                   graph capture ends a graph there (a
                                                                     graph break); replay computes a value
post-accumulate-grad  ``Tensor.register_post_accumulate_grad_hook``  DDP launches a bucket's all-reduce
end of backward       ``engine.queue_callback(fn)``                  DDP waits for its all-reduces
====================  =============================================  =====================================

``run`` is the rest of the chain: a wrapper calls ``run()`` exactly once and returns its result (possibly
after looking at it), or, to replace the op, returns a result without calling it (selective checkpointing
replays a kept output instead of recomputing it; wrappers registered after it then do not see that op). Wrappers nest in registration order: the first registered is the outermost. Example,
a wrapper that counts ops (what the profiler does, with timings)::

    from minigrad.autograd import extensions
    counts = collections.Counter()

    def count(op, args, kwargs, run):
        counts[op.name] += 1
        return run()

    with extensions.forward_wrappers.added(count):
        model(x)
"""
import contextlib
import functools


class _State:
    forward = False   # True while any forward-side registry below is non-empty
    backward = False  # True while any backward wrapper is registered
    outside_apply = False  # True while any outside_apply wrapper is registered
    host_reads = False  # True while any host-read listener is registered


state = _State()


class Registry:
    """An ordered list of callbacks for one extension point; keeps ``state`` in sync."""

    def __init__(self, name):
        self.name = name
        self.callbacks = []

    def add(self, fn, outermost=False):
        """Register ``fn``; returns a handle whose ``remove()`` unregisters it. ``outermost=True`` puts it
        around every wrapper already registered (the profiler: its times include theirs)."""
        if outermost:
            self.callbacks.insert(0, fn)
        else:
            self.callbacks.append(fn)
        _refresh()
        return _Handle(self, fn)

    def remove(self, fn):
        if fn in self.callbacks:
            self.callbacks.remove(fn)
            _refresh()

    @contextlib.contextmanager
    def added(self, fn):
        """``with registry.added(fn):`` registers ``fn`` for the block only."""
        self.add(fn)
        try:
            yield fn
        finally:
            self.remove(fn)

    def __bool__(self):
        return bool(self.callbacks)

    def __iter__(self):
        return iter(self.callbacks)

    def __repr__(self):
        return f"<extension point {self.name}: {len(self.callbacks)} registered>"


class _Handle:
    def __init__(self, registry, fn):
        self._registry, self._fn = registry, fn

    def remove(self):
        self._registry.remove(self._fn)


input_casts = Registry("input_casts")
forward_wrappers = Registry("forward_wrappers")
backward_wrappers = Registry("backward_wrappers")
outside_apply_wrappers = Registry("outside_apply_wrappers")
host_reads = Registry("host_reads")
_saved_hooks = []  # stack of (pack, unpack) pairs; Function.save_for_backward reads the top one


class saved_tensors_hooks:
    """Context manager: ``pack`` every array saved for backward, ``unpack`` it when backward reads it.

    The lever for activation offloading/compression and for recomputation (checkpointing)::

        with saved_tensors_hooks(lambda a: a.astype(np.float16), lambda a: a.astype(np.float32)):
            y = model(x)      # activations kept in float16 until backward reads them
    """

    def __init__(self, pack_hook, unpack_hook):
        self.hooks = (pack_hook, unpack_hook)

    def __enter__(self):
        _saved_hooks.append(self.hooks)
        return self

    def __exit__(self, *exc):
        _saved_hooks.pop()
        return False


_forward_listeners = []   # told when forward extensions appear or all go: Function swaps its apply


def on_forward_change(fn):
    """Call ``fn(active)`` whenever forward extensions become active (True) or all go (False)."""
    _forward_listeners.append(fn)
    fn(state.forward)


def _refresh():
    forward = bool(input_casts or forward_wrappers)
    changed, state.forward = forward != state.forward, forward
    state.backward = bool(backward_wrappers)
    state.outside_apply = bool(outside_apply_wrappers)
    state.host_reads = bool(host_reads)
    if changed:
        for fn in _forward_listeners:
            fn(forward)


def run_forward(op, args, kwargs, core):
    """``Function.apply`` with extensions: cast the inputs, then run ``core`` inside every wrapper."""
    for cast in input_casts.callbacks:
        args, kwargs = cast(op, args, kwargs)
    run = _chain(forward_wrappers.callbacks, (op, args, kwargs), lambda: core(op, args, kwargs))
    return run()


def run_backward(node, grad):
    """One node's backward inside every backward wrapper (the engine calls this when any is registered)."""
    run = _chain(backward_wrappers.callbacks, (node, grad), lambda: node.backward(node, grad))
    return run()


def _chain(wrappers, head, innermost):
    run = innermost
    for wrap in reversed(wrappers):
        run = _bind(wrap, head, run)
    return run


def _bind(wrap, head, run):
    return lambda: wrap(*head, run)


# --- what Function.apply does not show: tensors made outside it, and reads of a tensor's values ----------
def outside_apply(fn):
    """Mark a core function that does work ``Function.apply`` does not show: it makes tensors without it
    (``mg.zeros``, ``mg.randn``, ``mg.tensor``, ``x > 0``, ``x.detach()``, ``argmax``, ``max(dim)``'s
    indices) or changes its arguments after an op (``batch_norm``'s running statistics).

    While an ``outside_apply_wrappers`` callback is registered, each call runs inside the callbacks as an op
    runs inside ``forward_wrappers``: ``wrap(function, args, kwargs, run)``, ``function`` being the marked
    (public) function, so that a call can be recorded and replayed. Otherwise it costs one flag check."""
    @functools.wraps(fn)
    def call(*args, **kwargs):
        if not state.outside_apply:
            return fn(*args, **kwargs)
        return _chain(outside_apply_wrappers.callbacks, (call, args, kwargs), lambda: fn(*args, **kwargs))()
    return call


def host_read(tensor, what):
    """Tell the ``host_reads`` listeners that Python is about to read ``tensor``'s values on the host
    (``what``: 'item', 'numpy', 'tolist', 'array', 'bool', 'float', 'int', 'index', 'repr'). Called by
    those Tensor methods when ``state.host_reads`` is set; ``bool(t)`` calls ``t.item()``, so a listener
    may hear one read twice."""
    for fn in list(host_reads.callbacks):
        fn(tensor, what)
