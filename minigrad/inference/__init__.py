"""minigrad.inference: serving a decoder (lecture 12).

    kv_cache.py         the contiguous per-layer KV cache and the cache protocol models call
    sampling.py         greedy / temperature / top-k / top-p, one seeded generator per request
    generate.py         generate(): a batch of equal-length prompts through the cache
    block_allocator.py  fixed-size blocks: allocate, free, share, copy-on-write, reference counts
    block_manager.py    block tables per sequence, prompt-prefix sharing, copy-on-write
    paged_attention.py  attention through the block tables, tile by tile (online softmax)
    kv_pool.py          the pool's arrays, one forward's view of it, block events for the timeline
    sequence.py         a request being served; RequestOutput
    scheduler.py        continuous batching: admit, decode, preempt, retire
    engine.py           LLMEngine: the step loop over the paged pool
    quantize.py         weight-only int8: quantize_(model), per-output-channel scales
    trace.py            request traces: throughput, time to first token, inter-token latency
"""
from .block_allocator import BlockAllocator, NoFreeBlocksError
from .block_manager import BlockManager
from .engine import LLMEngine
from .generate import generate
from .kv_cache import KVCache, LayerKVCache, ModelSpec, causal_mask, model_spec
from .kv_pool import PagedBatch, PagedKVPool
from .paged_attention import PagedAttention, paged_attention
from .quantize import QuantizedEmbedding, QuantizedLinear, quantize_, quantize_per_channel, weight_bytes
from .sampling import SamplingParams, filter_logits, sample_token
from .scheduler import Scheduler, StepPlan
from .sequence import RequestOutput, Sequence, Status
from .trace import TraceReport, TraceRequest, make_trace, run_trace

__all__ = ["BlockAllocator", "BlockManager", "KVCache", "LLMEngine", "LayerKVCache", "ModelSpec",
           "NoFreeBlocksError", "PagedAttention", "PagedBatch", "PagedKVPool", "QuantizedEmbedding", "QuantizedLinear", "RequestOutput", "SamplingParams",
           "Scheduler", "Sequence", "Status", "StepPlan", "TraceReport", "TraceRequest", "causal_mask", "filter_logits", "generate",
           "make_trace", "model_spec", "paged_attention", "quantize_", "quantize_per_channel", "run_trace", "sample_token",
           "weight_bytes"]
