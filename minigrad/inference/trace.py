"""Request traces: serve a list of requests and report throughput and latency, as a serving benchmark does.

    trace = make_trace(32, vocab_size=84, prompt_lens=(4, 24), output_lens=(4, 96), seed=0)
    report = run_trace(LLMEngine(model, max_num_seqs=8), trace)
    print(report)                      # throughput, TTFT and inter-token latency percentiles, steps

A trace is a list of ``TraceRequest(prompt, params, arrival)``; ``arrival`` is seconds after the start
(0: all at once, an offline batch). The runner adds each request when its time comes, steps the engine
while anything is queued or running (sleeping only when idle until the next arrival), and measures:

* throughput: generated tokens / wall time;
* TTFT (time to first token): first token time - arrival, per request;
* inter-token latency (TPOT): gaps between a request's consecutive tokens, over all requests;
* steps (forwards of the decode batch): a machine-independent cost (the wall time of a step is roughly
  constant at small batch on a CPU, so tokens per step is what batching buys);
* KV memory waste, sampled after every step over the running sequences: slots the paged pool allocated
  but no token fills (at most one block's tail per sequence), against what a contiguous cache would have
  reserved: ``prompt + max_tokens`` per request (it knows the cap) or the model's whole context (it does not).
"""
import time
from dataclasses import dataclass

import numpy as np

from .sampling import SamplingParams


@dataclass
class TraceRequest:
    prompt: list
    params: SamplingParams
    arrival: float = 0.0


def make_trace(n, vocab_size, prompt_lens=(4, 24), output_lens=(4, 96), seed=0, rate=None, temperature=0.0,
               long_output_lens=None, long_fraction=0.0):
    """``n`` requests with prompt and output lengths drawn uniformly from the (low, high) ranges
    (inclusive); a ``long_fraction`` of them draw their output length from ``long_output_lens`` instead
    (a chat trace: mostly short answers, a few long ones). ``rate`` requests/s as a Poisson process (None:
    all arrive at 0). Output lengths are exact (``max_tokens``, no stop tokens), so two runs of the trace
    do the same work."""
    rng = np.random.default_rng(seed)
    t, out = 0.0, []
    for i in range(n):
        prompt = rng.integers(0, vocab_size, int(rng.integers(prompt_lens[0], prompt_lens[1] + 1))).tolist()
        lo, hi = long_output_lens if long_output_lens and rng.random() < long_fraction else output_lens
        params = SamplingParams(max_tokens=int(rng.integers(lo, hi + 1)), temperature=temperature,
                                seed=seed * 100_003 + i)
        if rate:
            t += float(rng.exponential(1.0 / rate))
        out.append(TraceRequest(prompt, params, t))
    return out


@dataclass
class TraceReport:
    outputs: list
    wall_s: float
    steps: int
    preemptions: int
    peak_blocks: int
    waste: dict = None      # mean empty token slots per running sequence: paged, contiguous (cap), (context)
    batch_sizes: list = None  # running sequences after each step

    @property
    def generated(self):
        return sum(len(o.token_ids) for o in self.outputs)

    @property
    def throughput(self):
        return self.generated / max(self.wall_s, 1e-12)

    @property
    def tokens_per_step(self):
        return self.generated / max(self.steps, 1)

    def ttft(self, q=50):
        return float(np.percentile([o.ttft for o in self.outputs if o.ttft is not None], q))

    def itl(self, q=50):
        gaps = [g for o in self.outputs for g in o.inter_token_latencies]
        return float(np.percentile(gaps, q)) if gaps else 0.0

    def as_dict(self):
        return {"requests": len(self.outputs), "generated": self.generated, "wall_s": self.wall_s,
                "throughput_tok_s": self.throughput, "steps": self.steps, "tokens_per_step": self.tokens_per_step,
                "ttft_p50_s": self.ttft(50), "ttft_p99_s": self.ttft(99), "itl_p50_s": self.itl(50),
                "itl_p90_s": self.itl(90), "itl_p99_s": self.itl(99), "preemptions": self.preemptions,
                "peak_blocks": self.peak_blocks, **{f"waste_{k}": v for k, v in (self.waste or {}).items()}}

    def __str__(self):
        d = self.as_dict()
        return (f"{d['requests']} requests, {d['generated']} tokens in {d['wall_s']:.2f} s: "
                f"{d['throughput_tok_s']:.0f} tok/s, {d['steps']} steps ({d['tokens_per_step']:.1f} tok/step); "
                f"TTFT p50 {d['ttft_p50_s'] * 1e3:.1f} ms p99 {d['ttft_p99_s'] * 1e3:.1f} ms; inter-token p50 "
                f"{d['itl_p50_s'] * 1e3:.2f} ms p90 {d['itl_p90_s'] * 1e3:.2f} ms p99 {d['itl_p99_s'] * 1e3:.2f} ms; "
                f"{d['preemptions']} preemptions, peak {d['peak_blocks']} blocks")


def run_trace(engine, trace):
    """Serve ``trace`` on ``engine`` (fresh or idle); returns a TraceReport (outputs in trace order)."""
    order = sorted(range(len(trace)), key=lambda i: trace[i].arrival)
    t0 = time.perf_counter()
    steps0, pre0 = engine.counters["steps"], engine.counters["preemptions"]
    ids, results, k = {}, {}, 0
    sampler = _WasteSampler(engine)
    while k < len(order) or engine.has_unfinished():
        now = time.perf_counter() - t0
        while k < len(order) and trace[order[k]].arrival <= now:
            r = trace[order[k]]
            ids[engine.add_request(r.prompt, r.params, arrival_time=t0 + r.arrival)] = order[k]
            k += 1
        if not engine.has_unfinished():
            time.sleep(max(0.0, trace[order[k]].arrival - (time.perf_counter() - t0)))
            continue
        for out in engine.step():
            results[ids[out.request_id]] = out
        sampler.sample()
    wall = time.perf_counter() - t0
    return TraceReport([results[i] for i in range(len(trace))], wall, engine.counters["steps"] - steps0,
                       engine.counters["preemptions"] - pre0, engine.counters["peak_blocks"], sampler.means(),
                       sampler.batch_sizes)


class _WasteSampler:
    """Empty KV slots per running sequence after each step, paged vs two contiguous policies (tokens)."""

    def __init__(self, engine):
        self.engine, self.n, self.batch_sizes = engine, 0, []
        self.sums = {"paged": 0, "contiguous_cap": 0, "contiguous_context": 0}

    def sample(self):
        eng = self.engine
        running = eng.scheduler.running
        self.batch_sizes.append(len(running))
        bs, context = eng.pool.block_size, eng.spec.max_context
        for seq in running:
            used = seq.num_computed
            self.sums["paged"] += len(eng.manager.block_tables[seq.seq_id]) * bs - used
            self.sums["contiguous_cap"] += seq.max_len - used
            self.sums["contiguous_context"] += (context if context else seq.max_len) - used
            self.n += 1

    def means(self):
        return {k: v / max(self.n, 1) for k, v in self.sums.items()}
