"""Serving the tiny GPT: continuous vs static batching on one trace, paged vs contiguous KV waste, and
int8 weights (memory, validation loss and perplexity).

    .venv/bin/python benchmarks/inference_serving.py           (no PyTorch peer: vLLM-style serving has none
                                                                 in PyTorch eager; the ratios are the result)

Trace: --requests requests, prompts of 4-24 tokens, output lengths mostly short (4-16) with a quarter long
(160-200): a chat-like mix. Both policies serve the same trace with the same engine settings; throughput =
generated tokens / wall time, best of --repeat interleaved runs.
"""
import argparse
import math

from common import pin_threads, table

pin_threads(1)
import minigrad as mg  # noqa: E402
from minigrad import inference as infer  # noqa: E402
from minigrad.datasets import load_text_corpus  # noqa: E402
from minigrad.examples import tiny_gpt  # noqa: E402


def batching(model, args):
    trace = infer.make_trace(args.requests, 84, prompt_lens=(4, 24), output_lens=(4, 16),
                             long_output_lens=(args.long_min, args.long_max), long_fraction=0.25, seed=0)
    best = {}
    for _ in range(args.repeat):
        for policy in ("continuous", "static"):
            eng = infer.LLMEngine(model, block_size=16, max_num_seqs=args.batch, policy=policy)
            r = infer.run_trace(eng, trace)
            if policy not in best or r.wall_s < best[policy].wall_s:
                best[policy] = r
    c, s = best["continuous"], best["static"]
    assert [o.token_ids for o in c.outputs] == [o.token_ids for o in s.outputs]
    rows = [[p, f"{r.throughput:,.0f}", r.steps, f"{r.tokens_per_step:.1f}", f"{r.ttft(50) * 1e3:.0f}",
             f"{r.ttft(99) * 1e3:.0f}", f"{r.itl(50) * 1e3:.1f}", f"{r.itl(99) * 1e3:.1f}"] for p, r in best.items()]
    print(f"\n{args.requests} requests, batch {args.batch}, {c.generated} generated tokens; best of {args.repeat}")
    print(table(rows, ["policy", "tok/s", "steps", "tok/step", "TTFT p50 ms", "TTFT p99 ms", "ITL p50 ms",
                       "ITL p99 ms"]))
    print(f"continuous / static throughput: {c.throughput / s.throughput:.2f}x (steps: {s.steps / c.steps:.2f}x)")
    bs = 16
    per_token = infer.model_spec(model).kv_bytes_per_token()
    w = c.waste
    rows = [[k, f"{v:.1f}", f"{v / bs:.2f}", f"{v * per_token / 1024:.1f}"] for k, v in w.items()]
    print("\nKV slots allocated but empty, mean per running sequence over the continuous run (block size 16)")
    print(table(rows, ["allocation", "empty slots", "in blocks", "KiB"]))


def quantization(args):
    corpus = load_text_corpus()
    mg.manual_seed(0)
    model = tiny_gpt.TinyGPT(corpus.vocab_size, 64, d_model=64, n_layer=2, n_head=4)
    opt = mg.optim.AdamW(tiny_gpt.param_groups(model, 0.1), lr=5e-3)
    g = mg.Generator().manual_seed(0)
    for _ in range(args.train_steps):
        x, y = corpus.get_batch("train", 32, 64, g)
        loss = tiny_gpt.lm_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    est = dict(batches=8, batch_size=32, block_size=64, seed=1, device="cpu")
    before = tiny_gpt.estimate_loss(model, corpus, "val", **est)
    float_w = sum(m.weight.nbytes for m in model.modules() if isinstance(m, (mg.nn.Linear, mg.nn.Embedding)))
    total_before = infer.weight_bytes(model)
    infer.quantize_(model)
    q = [m for m in model.modules() if isinstance(m, (infer.QuantizedLinear, infer.QuantizedEmbedding))]
    int8_w = sum(m.weight.nbytes for m in q)
    scales = sum(m.weight_scale.nbytes for m in q)
    after = tiny_gpt.estimate_loss(model, corpus, "val", **est)
    print(f"\nint8 weight-only quantization of the tiny GPT ({args.train_steps} training steps, d_model 64, 2 layers)")
    print(table([["Linear + Embedding weights", f"{float_w:,}", f"{int8_w:,} + {scales:,} scales",
                  f"{(int8_w + scales) / float_w:.3f}"],
                 ["whole model (attention in_proj, norms, biases stay float32)", f"{total_before:,}",
                  f"{infer.weight_bytes(model):,}", f"{infer.weight_bytes(model) / total_before:.3f}"],
                 ["validation loss (nats/char)", f"{before:.4f}", f"{after:.4f}", f"{after - before:+.4f}"],
                 ["perplexity", f"{math.exp(before):.3f}", f"{math.exp(after):.3f}",
                  f"{math.exp(after) / math.exp(before):.4f}"]],
                ["", "float32", "int8", "ratio / change"]))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--requests", type=int, default=96)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--train-steps", type=int, default=400)
    p.add_argument("--long-min", type=int, default=160)
    p.add_argument("--long-max", type=int, default=200)
    p.add_argument("--skip-quant", action="store_true")
    args = p.parse_args(argv)
    mg.manual_seed(0)
    model = tiny_gpt.TinyGPT(84, 256, d_model=64, n_layer=2, n_head=4).eval()
    batching(model, args)
    if not args.skip_quant:
        quantization(args)


if __name__ == "__main__":
    main()
