import numpy as np
import pytest

import minigrad as mg
from minigrad import inference as infer
from minigrad import nn
from minigrad.errors import ArgumentError, ShapeError


def test_incremental_logits_equal_full_recompute(device, gpt_factory):
    m = gpt_factory(device=device)
    ids = np.random.default_rng(1).integers(0, 20, (3, 30))
    cache = infer.KVCache.for_model(m, 3, 30)
    with mg.no_grad():
        steps = [m(mg.tensor(ids[:, :7], device=device), kv_cache=cache)]          # prefill 7
        steps += [m(mg.tensor(ids[:, t:t + 1], device=device), kv_cache=cache) for t in range(7, 26)]
        steps.append(m(mg.tensor(ids[:, 26:30], device=device), kv_cache=cache))  # a chunk of 4 at the end
        full = m(mg.tensor(ids, device=device)).numpy()
    got = np.concatenate([s.numpy() for s in steps], axis=1)
    np.testing.assert_allclose(got, full, rtol=0, atol=1e-12)
    assert cache.seq_len == 30
    assert cache.nbytes == 2 * 2 * 3 * 4 * 30 * 8 * 8     # 2 (k, v) * layers * N * H * S * D * 8 bytes
    with pytest.raises(ShapeError, match="max_len"):
        m(mg.tensor(ids[:, :1], device=device), kv_cache=cache)


@pytest.mark.parametrize("opts", [dict(temperature=0.0), dict(temperature=0.9, top_k=5),
                                  dict(temperature=1.3, top_p=0.7), dict(temperature=0.7, top_k=8, top_p=0.9)])
def test_generate_with_cache_equals_without(gpt, opts):
    prompt = [[1, 2, 3, 4], [4, 3, 2, 1]]
    a = infer.generate(gpt, prompt, 25, seed=5, **opts)
    b = infer.generate(gpt, prompt, 25, seed=5, use_cache=False, **opts)
    assert a.shape == (2, 29) and a.tolist() == b.tolist() and a.tolist()[0][:4] == [1, 2, 3, 4]


def test_greedy_is_argmax_and_rows_are_independent(gpt):
    out = infer.generate(gpt, [[3, 1, 4], [1, 5, 9]], 6, temperature=0).tolist()
    with mg.no_grad():
        for row in out:
            for t in range(3, 9):
                assert row[t] == int(gpt(mg.tensor([row[:t]]))[0, -1].numpy().argmax())
    # row r draws from seed + r whatever the batch: row 1 of a batch == that prompt alone with seed + 1
    batch = infer.generate(gpt, [[3, 1, 4], [1, 5, 9]], 10, temperature=1.0, seed=11).tolist()
    alone = infer.generate(gpt, [[1, 5, 9]], 10, temperature=1.0, seed=12).tolist()
    assert batch[1] == alone[0]


def test_stop_tokens_pad_and_end(gpt):
    free = infer.generate(gpt, [[1, 2]], 20, temperature=1.0, seed=0).tolist()[0]
    stop = free[5]                                    # a token the free run emits at step 3
    out = infer.generate(gpt, [[1, 2]], 20, temperature=1.0, seed=0, stop_token_ids=[stop]).tolist()[0]
    first = free.index(stop, 2)
    assert out[:first + 1] == free[:first + 1] and len(out) == first + 1    # one row: ends at its stop


def test_sampling_filters():
    logits = np.log(np.array([0.5, 0.2, 0.15, 0.1, 0.05]))
    assert np.isfinite(infer.filter_logits(logits, top_k=2)).sum() == 2
    kept = np.isfinite(infer.filter_logits(logits, top_p=0.8))          # 0.5 + 0.2 + 0.15 reaches 0.8
    assert kept.tolist() == [True, True, True, False, False]
    assert np.isfinite(infer.filter_logits(logits, top_p=0.1)).sum() == 1  # always at least one
    rng = np.random.default_rng(0)
    draws = [infer.sample_token(logits, infer.SamplingParams(temperature=1.0, top_k=2), rng) for _ in range(2000)]
    assert set(draws) == {0, 1} and abs(np.mean(np.array(draws) == 0) - 0.5 / 0.7) < 0.04
    for bad in (dict(temperature=-1), dict(top_k=0), dict(top_p=0.0), dict(max_tokens=0)):
        with pytest.raises(ArgumentError):
            infer.SamplingParams(**bad)


def test_generate_rejects_bad_input(gpt):
    with pytest.raises(ArgumentError, match="empty batch"):
        infer.generate(gpt, [], 3)
    with pytest.raises(ArgumentError, match="unknown token"):
        infer.generate(gpt, [[1, 99]], 3)
    with pytest.raises(ArgumentError, match="empty prompt"):
        infer.generate(gpt, [[]], 3)
    with pytest.raises(ShapeError, match="context of 48"):
        infer.generate(gpt, [list(range(10)) * 5], 3)
    with pytest.raises(ShapeError, match="different lengths"):
        infer.generate(gpt, [[1, 2], [1]], 3)
    assert infer.generate(gpt, [[1] * 40], 100, temperature=0).shape == (1, 48)   # capped at the context
    long = infer.generate(gpt, [[1] * 40], 30, temperature=0, context_shift=True)  # restarts from half
    assert long.shape == (1, 70)
    assert infer.generate(gpt, [[1] * 48], 5, context_shift=True).shape == (1, 53)  # reads the prompt's last half


def test_attention_cache_argument_errors():
    attn = nn.MultiheadAttention(8, 2, batch_first=True)
    x = mg.randn(1, 3, 8)
    cache = infer.KVCache(1, 1, 2, 4, 8)
    with pytest.raises(ArgumentError, match="is_causal"):
        attn(x, x, x, kv_cache=cache.layer(0))
    with pytest.raises(ArgumentError, match="self-attention"):
        attn(x, mg.randn(1, 3, 8), kv_cache=cache.layer(0), is_causal=True)
    with mg.no_grad():
        out, w = attn(x, kv_cache=cache.layer(0), is_causal=True, need_weights=False)
        ref, _ = attn(x, is_causal=True, need_weights=False)
    assert w is None
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)
