"""``LLMEngine``: continuous batching over the paged KV pool (nano-vllm's engine loop, in minigrad).

    engine = LLMEngine(model, num_blocks=64, block_size=16, max_num_seqs=8)
    outs = engine.generate([prompt_a, prompt_b], SamplingParams(max_tokens=32, temperature=0.8, seed=1))
    outs[0].token_ids, outs[0].finish_reason, engine.memory_stats()

Every ``step()``: the scheduler admits and preempts (``scheduler.py``); copy-on-write blocks are copied;
each admitted sequence is prefilled on its own (its uncached tokens in one forward, which samples its
first token); all other running sequences decode one token in **one batched forward** through the block
tables; sequences that emitted a stop token or reached ``max_tokens`` (or the model's context) retire at
once. A request's tokens equal running it alone: its sampler has its own generator and the batch only
changes which rows share a matrix product.

Bad requests: an empty prompt, unknown token ids or a prompt that fills the model's context raise
``ArgumentError``/``ShapeError`` from ``add_request`` (nothing is queued); a request that could never fit
in the pool (its prompt plus ``max_tokens`` need more blocks than exist) is **refused**: it finishes at once
with ``finish_reason="refused"`` and ``error`` saying why, and the other requests keep running.
"""
import itertools
import time

import numpy as np

from ..autograd.grad_mode import no_grad
from ..errors import ArgumentError
from ..tensor import tensor
from .block_allocator import BlockAllocator
from .block_manager import BlockManager
from .generate import check_prompt
from .kv_cache import model_spec
from .kv_pool import PagedBatch, PagedKVPool
from .paged_attention import TILE_BLOCKS
from .sampling import SamplingParams, sample_token
from .scheduler import Scheduler
from .sequence import RequestOutput, Sequence, Status


class LLMEngine:
    def __init__(self, model, *, num_blocks=None, block_size=16, max_num_seqs=16, max_prefill_tokens=2048,
                 policy="continuous", allocator=None, scheduler_cls=Scheduler, tile_blocks=TILE_BLOCKS):
        """num_blocks: pool size (default: room for ``max_num_seqs`` sequences of the full context).
        allocator: a replacement BlockAllocator (same five methods); scheduler_cls: a Scheduler subclass."""
        self.model, self.spec = model, model_spec(model)
        C = self.spec.max_context
        if num_blocks is None:
            if C is None:
                raise ArgumentError("LLMEngine: the model has no block_size (context); pass num_blocks")
            num_blocks = max_num_seqs * -(-C // block_size)
        s = self.spec
        self.pool = PagedKVPool(s.num_layers, int(num_blocks), int(block_size), s.num_heads, s.head_dim,
                                s.dtype, s.device)
        self.allocator = allocator if allocator is not None else BlockAllocator(num_blocks)
        self.manager = BlockManager(self.allocator, block_size, history=self)
        self.scheduler = scheduler_cls(self.manager, max_num_seqs, max_prefill_tokens, policy)
        self.tile_blocks = tile_blocks
        self.counters = {"steps": 0, "prefill_tokens": 0, "decode_tokens": 0, "preemptions": 0,
                         "refused": 0, "peak_blocks": 0}
        self._ids = itertools.count()
        self._done = []           # finished (or refused) since the last step() returned them
        self._active = set()      # ids queued or running (an id may be reused once its request is done)

    # --- requests ------------------------------------------------------------------------------------
    def add_request(self, prompt_token_ids, params=None, request_id=None, arrival_time=None):
        """Queue a request; returns its id. Raises on a malformed prompt (see the module docstring)."""
        params = SamplingParams() if params is None else params
        prompt = check_prompt("LLMEngine.add_request", prompt_token_ids, self.spec)
        rid = next(self._ids) if request_id is None else request_id
        if rid in self._active:
            raise ArgumentError(f"LLMEngine.add_request: request id {rid!r} is already being served")
        self._active.add(rid)
        seq = Sequence(rid, prompt, params, arrival_time)
        C = self.spec.max_context
        seq.max_len = len(prompt) + params.max_tokens if C is None else min(len(prompt) + params.max_tokens, C)
        need = self.manager.blocks_needed(seq.max_len)
        if need > self.allocator.num_blocks:
            seq.status, seq.finish_reason = Status.FINISHED, "refused"
            seq.error = (f"request {rid!r} needs {need} blocks of {self.pool.block_size} tokens (prompt "
                         f"{len(prompt)} + max_tokens {params.max_tokens}) but the pool has "
                         f"{self.allocator.num_blocks}")
            self.counters["refused"] += 1
            self._done.append(seq)
            return rid
        self.scheduler.add(seq)
        return rid

    def has_unfinished(self):
        return self.scheduler.has_unfinished() or bool(self._done)

    # --- one step ------------------------------------------------------------------------------------
    def step(self):
        """Run one scheduler step; returns the RequestOutputs of the requests that finished in it."""
        plan = self.scheduler.schedule()
        self.counters["preemptions"] += len(plan.preempted)
        for src, dst in plan.copies:
            self.pool.copy_block(src, dst)
        used = self.allocator.num_blocks - self.allocator.num_free_blocks
        self.counters["peak_blocks"] = max(self.counters["peak_blocks"], used)
        was_training = self.model.training
        if was_training:                       # eval() walks every module: only when it changes something
            self.model.eval()
        try:
            with no_grad():
                for seq in plan.prefill:
                    self._prefill(seq)
                if plan.decode:
                    self._decode(plan.decode)
        finally:
            if was_training:
                self.model.train()
        self.counters["steps"] += 1
        done, self._done = self._done, []
        self._active.difference_update(s.seq_id for s in done)
        return [RequestOutput.of(s) for s in done]

    def _prefill(self, seq):
        n = len(seq.tokens)
        start = min(seq.num_computed, n - 1)        # all cached (shared prefix): recompute the last token
        batch = PagedBatch(self.pool, [self.manager.block_tables[seq.seq_id]], [n], n - start,
                           write_from=[seq.num_computed], tile_blocks=self.tile_blocks)
        logits = self.model(tensor([seq.tokens[start:]], device=self.spec.device), kv_cache=batch)[:, -1]
        self.counters["prefill_tokens"] += n - start
        seq.num_computed = n
        self._emit([seq], logits)

    def _decode(self, seqs):
        tables = [self.manager.block_tables[s.seq_id] for s in seqs]
        batch = PagedBatch(self.pool, tables, [len(s.tokens) for s in seqs], 1, tile_blocks=self.tile_blocks)
        last = tensor([[s.tokens[-1]] for s in seqs], device=self.spec.device)
        logits = self.model(last, kv_cache=batch)[:, -1]
        self.counters["decode_tokens"] += len(seqs)
        for s in seqs:
            s.num_computed = len(s.tokens)
        self._emit(seqs, logits)

    def _emit(self, seqs, logits):
        host = logits.cpu().numpy().astype(np.float64)
        now = time.perf_counter()
        for seq, row in zip(seqs, host):
            tok = sample_token(row, seq.params, seq.rng)
            seq.tokens.append(tok)
            seq.token_times.append(now)
            if tok in seq.params.stop_token_ids:
                self._finish(seq, "stop")
            elif len(seq.tokens) >= seq.max_len:
                self._finish(seq, "length")

    def _finish(self, seq, reason):
        self.scheduler.finish(seq, reason)
        self._done.append(seq)

    # --- whole runs ----------------------------------------------------------------------------------
    def generate(self, prompts, params=None):
        """Serve every prompt to completion; outputs in the prompts' order. ``params``: one SamplingParams
        for all, or a list with one per prompt."""
        if len(prompts) == 0:
            raise ArgumentError("LLMEngine.generate: empty batch (no prompts)")
        params = params if isinstance(params, (list, tuple)) else [params] * len(prompts)
        if len(params) != len(prompts):
            raise ArgumentError(f"LLMEngine.generate: {len(prompts)} prompts but {len(params)} SamplingParams")
        ids = [self.add_request(p, sp) for p, sp in zip(prompts, params)]
        results = {}
        while self.has_unfinished():
            for out in self.step():
                results[out.request_id] = out
        return [results[i] for i in ids]

    # --- block events (the manager's history hook) and statistics ------------------------------------
    def record(self, action, block, owner):
        if self.pool.history is not None:
            self.pool.history.record(action, block, owner)

    def memory_stats(self):
        """The pool's numbers in ``mg.memory.memory_stats``' vocabulary, plus KV-specific counters.

        allocated = blocks in use * block_bytes; requested = token slots holding keys and values * bytes per
        token; reserved = the whole pool. ``fragmentation`` here is the pool's *internal* waste
        1 - requested / allocated (empty slots at the end of last blocks): at most one block per sequence.
        """
        used = self.allocator.num_blocks - self.allocator.num_free_blocks
        per_token = self.pool.block_bytes // self.pool.block_size
        allocated, requested = used * self.pool.block_bytes, self.manager.tokens_stored() * per_token
        return {"allocated_bytes.all.current": allocated, "requested_bytes.all.current": requested,
                "reserved_bytes.all.current": self.pool.nbytes,
                "allocated_bytes.all.peak": self.counters["peak_blocks"] * self.pool.block_bytes,
                "fragmentation": 0.0 if not allocated else 1.0 - requested / allocated,
                "kv.blocks.total": self.allocator.num_blocks, "kv.blocks.used": used,
                "kv.blocks.free": self.allocator.num_free_blocks, "kv.block_bytes": self.pool.block_bytes,
                "kv.prefix_hits": self.manager.prefix_hits, "kv.cow_copies": self.manager.cow_copies,
                "kv.preemptions": self.counters["preemptions"], "kv.refused": self.counters["refused"]}
