"""Choosing the next token from logits: greedy, temperature, top-k, top-p (nucleus), seeded per request.

Each request samples with its own ``numpy`` generator (seeded by ``SamplingParams.seed``), on the host, in
float64. That is what makes batching invisible: a request's draws depend only on its own logits and its
own generator, never on which other requests shared its forward pass, so a request decoded in a batch of
16 (or preempted and recomputed) emits the same tokens as when it runs alone.

Order of the filters (as Hugging Face and vLLM apply them): temperature scales the logits, top-k keeps
the k largest, top-p keeps the smallest set of the most likely tokens whose probability reaches p (at
least one token), then one token is drawn from the renormalised distribution.
"""
import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import ArgumentError
from ..random import host_rng


@dataclass
class SamplingParams:
    """How one request decodes (vLLM's names). ``temperature=0`` is greedy (argmax, no draws).

    max_tokens: new tokens at most; stop_token_ids: generation ends after emitting one of them (it is kept
    in the output); seed: the request's own generator (None: drawn from minigrad's default generator, so
    ``mg.manual_seed`` makes runs repeatable).
    """
    max_tokens: int = 16
    temperature: float = 1.0
    top_k: int = None
    top_p: float = None
    seed: int = None
    stop_token_ids: tuple = field(default_factory=tuple)

    def __post_init__(self):
        op = "SamplingParams"
        if isinstance(self.max_tokens, bool) or int(self.max_tokens) != self.max_tokens or self.max_tokens < 1:
            raise ArgumentError(f"{op}: max_tokens must be a positive integer, got {self.max_tokens!r}")
        if not (isinstance(self.temperature, (int, float)) and math.isfinite(self.temperature)
                and self.temperature >= 0):
            raise ArgumentError(f"{op}: temperature must be a finite number >= 0 (0: greedy), got "
                                f"{self.temperature!r}")
        if self.top_k is not None and (int(self.top_k) != self.top_k or self.top_k < 1):
            raise ArgumentError(f"{op}: top_k must be a positive integer or None, got {self.top_k!r}")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise ArgumentError(f"{op}: top_p must be in (0, 1] or None, got {self.top_p!r}")
        if isinstance(self.stop_token_ids, int):
            self.stop_token_ids = (self.stop_token_ids,)
        self.stop_token_ids = tuple(int(t) for t in (self.stop_token_ids or ()))
        self.max_tokens = int(self.max_tokens)

    def make_generator(self):
        """The request's own numpy Generator (see the module docstring)."""
        seed = self.seed if self.seed is not None else int(host_rng().integers(2 ** 63))
        return np.random.default_rng(seed)


def filter_logits(logits, temperature=1.0, top_k=None, top_p=None):
    """float64 log-weights (-inf where filtered out) after temperature, top-k and top-p; ``logits`` (V,)."""
    z = np.asarray(logits, dtype=np.float64) / temperature
    if top_k is not None and top_k < z.size:
        kth = np.partition(z, -top_k)[-top_k]
        z = np.where(z < kth, -np.inf, z)
    if top_p is not None and top_p < 1:
        order = np.argsort(-z, kind="stable")
        p = np.exp(z[order] - z[order[0]])
        cum = np.cumsum(p) / p.sum()
        keep = int(np.searchsorted(cum, top_p)) + 1       # the smallest prefix whose mass reaches top_p
        drop = order[keep:]
        z = z.copy()
        z[drop] = -np.inf
    return z


def sample_token(logits, params, rng):
    """One token id from ``logits`` (V,) under ``params`` with the request's generator ``rng``."""
    if params.temperature == 0:
        return int(np.argmax(logits))
    z = filter_logits(logits, params.temperature, params.top_k, params.top_p)
    p = np.exp(z - z.max())
    cdf = np.cumsum(p)
    return int(min(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"), z.size - 1))
