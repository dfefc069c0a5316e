"""Mode state: what every op consults, per thread (grad mode, saved-tensor hooks, extensions in force).

``Function.apply`` reads it on every call, ``save_for_backward`` and the engine through it. It is one
immutable ``Mode`` held by one ``contextvars.ContextVar``: entering a mode (``no_grad``, a saved-tensor
hook, a thread's own wrapper) sets a new Mode, leaving sets the previous one back. Nothing else in a Mode
changes, so a reader never sees half of a change.

Why a ContextVar and not ``threading.local``: a new thread starts with the defaults either way (Python
gives each thread an empty context), and an asyncio task gets a copy of its creator's; but
``ContextVar.get()`` costs ~10 ns where reading a ``threading.local`` attribute costs ~70 ns, on the
hottest path of the framework (measured: ``benchmarks/RESULTS.md``).

Process-wide registrations (the memory pool's labels: the pool serves every thread) are not in a Mode;
``process`` holds their flags, and ``Function.apply`` checks both: ``mode.forward or process.forward``.
"""
import contextvars


class Mode:
    """One thread's mode. Never changed in place: ``replace`` returns the next one."""
    __slots__ = ("grad", "forward", "backward", "saved_hooks", "pack")

    def __init__(self, grad=True, forward=False, backward=False, saved_hooks=()):
        self.grad = grad                # grad mode: ops record the graph
        self.forward = forward          # this thread has forward wrappers or casts: apply takes the long way
        self.backward = backward        # this thread has backward wrappers
        self.saved_hooks = saved_hooks  # (pack, unpack) pairs of saved_tensors_hooks, innermost last
        self.pack = saved_hooks[-1] if saved_hooks else None   # the pair in force (what apply hands on)

    def replace(self, grad=None, forward=None, backward=None, saved_hooks=None):
        return Mode(self.grad if grad is None else grad, self.forward if forward is None else forward,
                    self.backward if backward is None else backward,
                    self.saved_hooks if saved_hooks is None else saved_hooks)

    def __repr__(self):
        return (f"Mode(grad={self.grad}, forward={self.forward}, backward={self.backward}, "
                f"saved_hooks={len(self.saved_hooks)})")


class _Process:
    """Flags of the process-wide registrations (every thread sees them)."""
    forward = False
    backward = False


process = _Process()
current = contextvars.ContextVar("minigrad.mode", default=Mode())
get = current.get          # ``mode.get()``: the calling thread's Mode
set = current.set          # noqa: A001  (``mode.set(m)``, as ContextVar.set)
