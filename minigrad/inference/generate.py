"""``generate``: decode a batch of equal-length prompts with a KV cache (or without, to compare).

    ids = generate(model, prompt_ids, max_new_tokens=50, temperature=0.8, top_k=20, seed=0,
                   stop_token_ids=[newline])

One prefill forward over the prompts fills the per-layer caches; then each step feeds only the last token
of every row (``model(last, kv_cache=cache)``). ``use_cache=False`` reruns the whole prefix every step
instead: the slow reference the tests compare against (equal in float64) and the benchmark measures.

The model's forward must take ``kv_cache=`` and follow the protocol in ``kv_cache.py`` (``TinyGPT`` does).
Ragged prompts, requests arriving over time and memory shared between requests are the engine's job
(``engine.py``); this function is the plain batch loop.
"""
import numpy as np

from ..autograd.grad_mode import no_grad
from ..errors import ArgumentError, ShapeError
from ..tensor import Tensor, tensor
from .kv_cache import KVCache, model_spec
from .sampling import SamplingParams, sample_token


def check_prompt(op, ids, spec, check_context=True):
    """Refuse what a model cannot decode, naming the request: an empty prompt, ids outside the vocabulary,
    a prompt with no room left in the context. Returns the ids as a list of ints."""
    ids = [int(t) for t in ids]
    if not ids:
        raise ArgumentError(f"{op}: empty prompt (a decoder needs at least one token to condition on)")
    V = spec.vocab_size
    bad = [t for t in ids if t < 0 or (V is not None and t >= V)]
    if bad:
        raise ArgumentError(f"{op}: unknown token id(s) {sorted(set(bad))[:5]} (the vocabulary has {V} ids, "
                            f"0..{V - 1})")
    C = spec.max_context
    if check_context and C is not None and len(ids) >= C:
        raise ShapeError(f"{op}: prompt of {len(ids)} tokens leaves no room in the model's context of {C} "
                         f"tokens (at most {C - 1} prompt tokens, to generate at least one)")
    return ids


def generate(model, input_ids, max_new_tokens, *, temperature=1.0, top_k=None, top_p=None, seed=None,
             stop_token_ids=(), use_cache=True, context_shift=False):
    """Continue each row of ``input_ids`` ((N, T) ids: a Tensor, an array or a list of equal-length lists)
    by up to ``max_new_tokens`` tokens. Returns an (N, T + n) int64 Tensor; a row that emitted a stop token
    is padded with that token afterwards (as Hugging Face pads with ``eos``), and decoding ends when every
    row has stopped.

    temperature 0 is greedy; top_k / top_p filter as in ``sampling.py``; ``seed``: row r draws from its own
    generator seeded ``seed + r`` (None: seeds from ``mg.manual_seed``'s generator), so a row's tokens do
    not depend on the rest of the batch.

    The model's context (``model.block_size``) caps generation, unless ``context_shift=True``: then a full
    cache restarts from the last half of the context (one re-prefill every C/2 tokens, as llama.cpp's
    context shift; without the cache the window slides by one token every step instead), and a prompt as
    long as the context is read from its last half.
    """
    rows = _rows(input_ids)
    spec = model_spec(model)
    rows = [check_prompt("generate", r, spec, check_context=not context_shift) for r in rows]
    if len({len(r) for r in rows}) != 1:
        raise ShapeError(f"generate: prompts of different lengths {sorted({len(r) for r in rows})}; pad them "
                         f"or use minigrad.inference.LLMEngine for ragged batches")
    N, T, C = len(rows), len(rows[0]), spec.max_context
    if int(max_new_tokens) < 0:
        raise ArgumentError(f"generate: max_new_tokens must be >= 0, got {max_new_tokens}")
    n_new = int(max_new_tokens) if context_shift or C is None else min(int(max_new_tokens), C - T)
    feed = rows if C is None or T < C else [r[-(C // 2):] for r in rows]   # context_shift: a long prompt
    cache_len = T + n_new if C is None else min(T + n_new, C)
    base = None if seed is None else int(seed)
    params = [SamplingParams(temperature=temperature, top_k=top_k, top_p=top_p,
                             seed=None if base is None else base + r, stop_token_ids=stop_token_ids)
              for r in range(N)]
    rngs = [p.make_generator() for p in params]
    stops = set(params[0].stop_token_ids)
    out = [list(r) for r in rows]
    done = [False] * N
    was_training = model.training
    if was_training:
        model.eval()
    try:
        with no_grad():
            cache = None
            for _ in range(n_new):
                if not use_cache:
                    logits = model(tensor([r[-C:] if C else r for r in out], device=spec.device))[:, -1]
                else:
                    if cache is None or cache.seq_len + len(feed[0]) > cache.max_len:
                        if cache is not None:                   # context full: restart from its last half
                            feed = [r[-(C // 2):] for r in out]
                        cache = KVCache.for_model(model, N, cache_len)
                    logits = model(tensor(feed, device=spec.device), kv_cache=cache)[:, -1]
                host = logits.cpu().numpy().astype(np.float64)
                feed = []
                for r in range(N):
                    tok = out[r][-1] if done[r] else sample_token(host[r], params[r], rngs[r])
                    done[r] = done[r] or tok in stops
                    out[r].append(tok)
                    feed.append([tok])
                if all(done):
                    break
    finally:
        if was_training:
            model.train()
    return tensor(out, dtype="int64", device=spec.device)


def _rows(input_ids):
    if isinstance(input_ids, Tensor):
        input_ids = input_ids.cpu().numpy()
    arr = input_ids.tolist() if isinstance(input_ids, np.ndarray) else input_ids
    if arr is None or (hasattr(arr, "__len__") and len(arr) == 0):
        raise ArgumentError("generate: empty batch (no prompts)")
    if isinstance(arr[0], (int, np.integer)):
        raise ShapeError("generate: input_ids must be (N, T) (a batch of prompts); wrap one prompt as [ids]")
    return [list(r) for r in arr]
