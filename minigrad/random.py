"""Random number generation: ``mg.manual_seed`` and ``mg.Generator`` (a seeded NumPy PCG64 underneath).

Random tensors are drawn on the host and then placed on the requested device, so the same seed gives the
same numbers on every device (slower on GPU than drawing there, but reproducible across devices, which is
what a course needs).
"""
import contextlib
import contextvars

import numpy as np


class Generator:
    """A seedable source of random numbers; ``generator.np`` is the underlying ``numpy.random.Generator``."""

    def __init__(self, device="cpu"):
        self.device = device
        self._seed = None
        self.np = np.random.default_rng()

    def manual_seed(self, seed):
        self._seed = int(seed)
        self.np = np.random.default_rng(self._seed)
        return self

    def seed(self):
        s = int(np.random.SeedSequence().entropy % (2 ** 63))
        self.manual_seed(s)
        return s

    def initial_seed(self):
        return self._seed

    def get_state(self):
        return self.np.bit_generator.state

    def set_state(self, state):
        self.np.bit_generator.state = state
        return self


default_generator = Generator()


def manual_seed(seed):
    """Seed the default generator (every random factory, dropout and init use it unless given another)."""
    return default_generator.manual_seed(seed)


def seed():
    return default_generator.seed()


def initial_seed():
    return default_generator.initial_seed()


def get_rng_state():
    return default_generator.get_state()


def set_rng_state(state):
    default_generator.set_state(state)


_watch = contextvars.ContextVar("minigrad.random.watch", default=None)


@contextlib.contextmanager
def watch_generators(fn):
    """While in force (in this thread), ``fn(generator)`` is called before every draw from a generator:
    activation checkpointing notes each generator's state before its first use in a region, to replay its
    numbers in the recomputation. Nested watches are all called, innermost last."""
    outer = _watch.get()
    token = _watch.set(fn if outer is None else lambda g: (outer(g), fn(g)))
    try:
        yield
    finally:
        _watch.reset(token)


def host_rng(generator=None):
    """The numpy Generator to draw from (every random op and factory gets it here)."""
    g = generator or default_generator
    watch = _watch.get()
    if watch is not None:
        watch(g)
    return g.np
