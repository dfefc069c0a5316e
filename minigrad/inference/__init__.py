"""minigrad.inference: serving a decoder (lecture 12).

    kv_cache.py        the contiguous per-layer KV cache and the cache protocol models call
    sampling.py        greedy / temperature / top-k / top-p, one seeded generator per request
    generate.py        generate(): a batch of equal-length prompts through the cache
"""
from .generate import generate
from .kv_cache import KVCache, LayerKVCache, ModelSpec, causal_mask, model_spec
from .sampling import SamplingParams, filter_logits, sample_token

__all__ = ["KVCache", "LayerKVCache", "ModelSpec", "SamplingParams", "causal_mask", "filter_logits", "generate",
           "model_spec", "sample_token"]
