"""Decode speed of the tiny GPT: minigrad without and with the KV cache, side by side with the same model
(same weights) in PyTorch eager with a KV cache, at batch 1 and 16; and the cache's memory.

    .venv-bench/bin/python benchmarks/inference_decode.py        (PyTorch is measured when importable)

Greedy decoding of --new tokens after a --prompt-token prompt; tokens/s = batch * new / time (prefill
included, the same for every column). Both frameworks preallocate the cache (minigrad's KVCache, a static
cache in the PyTorch model) and use their fused attention (F.scaled_dot_product_attention).
"""
import argparse
import sys

from common import interleaved_medians, pin_threads, table, try_import_torch

pin_threads(1)
import numpy as np  # noqa: E402

import minigrad as mg  # noqa: E402
from minigrad import inference as infer  # noqa: E402
from minigrad.examples.tiny_gpt import TinyGPT  # noqa: E402


def torch_gpt(torch, model):
    """The same network in PyTorch, weights copied from the minigrad TinyGPT, with a static KV cache."""
    F = torch.nn.functional
    sd = {k: torch.tensor(v.detach().numpy()) for k, v in model.state_dict().items()}
    H = model.blocks[0].attn.num_heads
    n_layer = len(model.blocks)

    def ln(x, p):
        return F.layer_norm(x, x.shape[-1:], sd[p + ".weight"], sd[p + ".bias"], 1e-5)

    def forward(idx, cache, start):
        N, T = idx.shape
        x = sd["tok_emb.weight"][idx] + sd["pos_emb.weight"][start:start + T]
        for i in range(n_layer):
            p = f"blocks.{i}."
            h = ln(x, p + "ln1")
            q, k, v = F.linear(h, sd[p + "attn.in_proj_weight"], sd[p + "attn.in_proj_bias"]).split(x.shape[-1], -1)
            q, k, v = (t.reshape(N, T, H, -1).transpose(1, 2) for t in (q, k, v))
            kc, vc = cache[i]
            kc[:, :, start:start + T] = k
            vc[:, :, start:start + T] = v
            a = F.scaled_dot_product_attention(q, kc[:, :, :start + T], vc[:, :, :start + T], is_causal=T > 1)
            x = x + F.linear(a.transpose(1, 2).reshape(N, T, -1), sd[p + "attn.out_proj.weight"],
                             sd[p + "attn.out_proj.bias"])
            h = F.gelu(F.linear(ln(x, p + "ln2"), sd[p + "mlp.fc.weight"], sd[p + "mlp.fc.bias"]), approximate="tanh")
            x = x + F.linear(h, sd[p + "mlp.proj.weight"], sd[p + "mlp.proj.bias"])
        return F.linear(ln(x, "ln_f"), sd["head.weight"], sd["head.bias"])

    def generate(prompt, new):
        N, T = prompt.shape
        D = model.blocks[0].attn.head_dim
        cache = [(torch.zeros(N, H, T + new, D), torch.zeros(N, H, T + new, D)) for _ in range(n_layer)]
        ids, feed, start = [prompt], prompt, 0
        with torch.inference_mode():
            for _ in range(new):
                logits = forward(feed, cache, start)
                start += feed.shape[1]
                feed = logits[:, -1].argmax(-1, keepdim=True)
                ids.append(feed)
        return torch.cat(ids, 1)
    return generate


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--n-layer", type=int, default=4)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--prompt", type=int, default=16)
    p.add_argument("--new", type=int, default=48)
    p.add_argument("--batches", type=int, nargs="+", default=[1, 16])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--sweep", type=lambda v: tuple(int(x) for x in v.split(",")), nargs="*",
                   default=[(16, 32), (64, 64), (128, 128)], help="prompt,new pairs for the batch-1 sweep")
    args = p.parse_args(argv)
    context = args.prompt + args.new
    mg.manual_seed(0)
    model = TinyGPT(84, context, d_model=args.d_model, n_layer=args.n_layer, n_head=args.n_head).eval()
    torch = try_import_torch(1)
    tgen = torch_gpt(torch, model) if torch is not None else None
    rows = []
    for B in args.batches:
        prompt = np.random.default_rng(B).integers(0, 84, (B, args.prompt))
        fns = [lambda: infer.generate(model, prompt, args.new, temperature=0, use_cache=False),
               lambda: infer.generate(model, prompt, args.new, temperature=0)]
        if tgen is not None:
            tp = torch.tensor(prompt)
            same = (tgen(tp, args.new).numpy() == infer.generate(model, prompt, args.new, temperature=0).numpy())
            fns.append(lambda: tgen(tp, args.new))
        times = interleaved_medians(fns, repeat=args.repeat, warmup=1, block=1)
        rate = [B * args.new / t for t in times]
        row = [B, f"{rate[0]:,.0f}", f"{rate[1]:,.0f}", f"{rate[1] / rate[0]:.1f}x"]
        if tgen is not None:
            row += [f"{rate[2]:,.0f}", f"{rate[1] / rate[2]:.2f}", f"{same.mean():.0%}"]
        rows.append(row)
    heads = ["batch", "minigrad no cache tok/s", "minigrad KV cache tok/s", "cache speed-up"]
    if tgen is not None:
        heads += [f"torch {torch.__version__} KV cache tok/s", "minigrad / torch", "same tokens"]
    else:
        print("(PyTorch not importable: run `make bench` to measure it side by side)", file=sys.stderr)
    print(f"tiny GPT d_model={args.d_model}, {args.n_layer} layers, {args.n_head} heads, vocab 84, float32; greedy, "
          f"prompt {args.prompt} + {args.new} new tokens; 1 thread; median of {args.repeat}")
    print(table(rows, heads))

    sweep = []
    for T, new in args.sweep:                               # batch 1, minigrad alone: how the gap grows
        m = TinyGPT(84, T + new, d_model=args.d_model, n_layer=args.n_layer, n_head=args.n_head).eval()
        prompt = np.random.default_rng(T).integers(0, 84, (1, T))
        t_no, t_kv = interleaved_medians([lambda: infer.generate(m, prompt, new, temperature=0, use_cache=False),
                                          lambda: infer.generate(m, prompt, new, temperature=0)],
                                         repeat=max(1, args.repeat // 2), warmup=0, block=1)
        sweep.append([T, new, f"{new / t_no:,.0f}", f"{new / t_kv:,.0f}", f"{t_no / t_kv:.1f}x"])
    if sweep:
        print("\nbatch 1 over prompt / output lengths (minigrad)")
        print(table(sweep, ["prompt", "new", "no cache tok/s", "KV cache tok/s", "speed-up"]))

    spec = infer.model_spec(model)
    mem_rows = []
    for T, new in ((16, 48), (64, 192), (256, 768)):
        cache = infer.KVCache(spec.num_layers, 16, spec.num_heads, spec.head_dim, T + new)
        formula = spec.kv_bytes_per_token(4) * 16 * (T + new)
        mem_rows.append([T, new, f"{cache.nbytes / 2**20:.2f}", f"{formula / 2**20:.2f}",
                         f"{(T + new) * new * 16:,}", f"{(T + new) * 16:,}"])
    print("\nKV-cache memory at batch 16 (bytes = 2 * layers * heads * head_dim * 4 B * tokens) and the tokens "
          "pushed through the model per sequence batch")
    print(table(mem_rows, ["prompt", "new", "cache MiB", "formula MiB", "tokens recomputed w/o cache (~)",
                           "tokens computed with cache"]))


if __name__ == "__main__":
    main()
