"""Continuous batching: outputs equal running alone, preemption, prefix sharing, refusals, statistics."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import inference as infer
from minigrad.errors import ArgumentError, ShapeError


def _requests(n, seed=0, vocab=20):
    rng = np.random.default_rng(seed)
    prompts = [rng.integers(0, vocab, int(rng.integers(1, 12))).tolist() for _ in range(n)]
    params = [infer.SamplingParams(max_tokens=int(rng.integers(1, 24)), temperature=0.8, top_k=8, seed=i)
              for i in range(n)]
    return prompts, params


def _alone(model, prompt, p):
    return infer.generate(model, [prompt], p.max_tokens, temperature=p.temperature, top_k=p.top_k,
                          seed=p.seed).tolist()[0][len(prompt):]


def test_every_request_equals_running_alone_even_when_preempted(gpt):
    prompts, params = _requests(10)
    prompts += [prompts[0]] * 2                           # identical prompts share every block
    params += [infer.SamplingParams(max_tokens=15, temperature=0.8, top_k=8, seed=s) for s in (40, 41)]
    eng = infer.LLMEngine(gpt, num_blocks=12, block_size=4, max_num_seqs=6)   # too small: preemption
    outs = eng.generate(prompts, params)
    assert eng.counters["preemptions"] > 0 and eng.manager.prefix_hits > 0
    for prompt, p, out in zip(prompts, params, outs):
        assert out.token_ids == _alone(gpt, prompt, p) and out.finish_reason == "length"
    eng.manager.check()                                    # nothing leaked, nothing double-owned
    assert eng.allocator.num_free_blocks == 12 and not eng.manager.block_tables
    log = eng.scheduler.log
    assert {i for s in log for i in s["finished"]} == set(range(12))
    assert max(len(s["decoded"]) for s in log) > 1         # decoding is batched
    assert all(len(s["admitted"]) + len(s["decoded"]) <= 6 for s in log)


def test_shared_prompt_blocks_copy_on_write(gpt):
    eng = infer.LLMEngine(gpt, num_blocks=16, block_size=4, max_num_seqs=4)
    prompt = [1, 2, 3, 4, 5, 6]                            # a full block + a partial one, shared by all
    params = [infer.SamplingParams(max_tokens=5, temperature=1.0, seed=s) for s in range(3)]
    outs = eng.generate([prompt] * 3, params)
    assert eng.manager.prefix_hits == 4                    # 2 blocks x 2 later requests
    assert eng.manager.cow_copies == 2                     # two writers left the shared partial block
    assert eng.counters["prefill_tokens"] == 6 + 1 + 1     # the later two recompute only the last token
    for p, out in zip(params, outs):
        assert out.token_ids == _alone(gpt, prompt, p)


def test_stop_tokens_retire_at_once(gpt):
    free = _alone(gpt, [3, 4], infer.SamplingParams(max_tokens=20, temperature=1.0, seed=2))
    p = infer.SamplingParams(max_tokens=20, temperature=1.0, seed=2, stop_token_ids=[free[4]])
    out = infer.LLMEngine(gpt, block_size=4).generate([[3, 4]], p)[0]
    assert out.finish_reason == "stop" and out.token_ids == free[:free.index(free[4]) + 1]


def test_bad_requests_are_refused_and_the_others_keep_running(gpt):
    eng = infer.LLMEngine(gpt, num_blocks=6, block_size=4, max_num_seqs=4)
    with pytest.raises(ArgumentError, match="unknown token"):
        eng.add_request([1, 25])
    with pytest.raises(ArgumentError, match="empty prompt"):
        eng.add_request([])
    with pytest.raises(ShapeError, match="context"):
        eng.add_request(list(range(10)) * 5)
    with pytest.raises(ArgumentError, match="empty batch"):
        eng.generate([])
    eng.add_request([1, 2], request_id="a")
    with pytest.raises(ArgumentError, match="already being served"):
        eng.add_request([3], request_id="a")
    while eng.has_unfinished():
        eng.step()
    ok = infer.SamplingParams(max_tokens=6, temperature=0)
    huge = infer.SamplingParams(max_tokens=40, temperature=0)   # 2 + 40 tokens need 11 blocks > 6
    outs = eng.generate([[1, 2], [3, 4], [5, 6]], [ok, huge, ok])
    assert [o.finish_reason for o in outs] == ["length", "refused", "length"]
    assert "needs 11 blocks" in outs[1].error and outs[1].token_ids == []
    assert outs[0].token_ids == _alone(gpt, [1, 2], ok) and eng.memory_stats()["kv.refused"] == 1


def test_memory_stats_waste_and_timeline(gpt):
    eng = infer.LLMEngine(gpt, num_blocks=20, block_size=4, max_num_seqs=4)
    eng.pool.record_history()
    for prompt in ([1, 2, 3], [4, 5, 6, 7, 8], [9]):
        eng.add_request(prompt, infer.SamplingParams(max_tokens=30, temperature=0))
    eng.step()
    eng.step()                                              # 3 prompts prefilled, then one decode step
    st = eng.memory_stats()
    assert st["kv.blocks.used"] == 1 + 2 + 1 and st["reserved_bytes.all.current"] == 20 * st["kv.block_bytes"]
    assert st["kv.block_bytes"] == 2 * 2 * 4 * 8 * 8 * 4     # 2 * layers * H * D * 8 bytes * block_size
    waste = st["allocated_bytes.all.current"] - st["requested_bytes.all.current"]
    assert 0 < waste < 3 * st["kv.block_bytes"]              # at most one partly filled block per sequence
    assert st["requested_bytes.all.current"] == (3 + 5 + 1 + 3) * st["kv.block_bytes"] // 4
    snap = eng.pool.snapshot()
    from minigrad.memory.plot import timeline
    x, series, reserved = timeline(snap, by="op")
    assert set(series) == {"request 0", "request 1", "request 2"} and reserved[-1] == eng.pool.nbytes


def test_continuous_batching_beats_static_in_steps(gpt):
    trace = infer.make_trace(16, 20, prompt_lens=(2, 6), output_lens=(2, 4), long_output_lens=(30, 36),
                             long_fraction=0.25, seed=3)
    reports = {pol: infer.run_trace(infer.LLMEngine(gpt, block_size=4, max_num_seqs=4, policy=pol), trace)
               for pol in ("continuous", "static")}
    c, s = reports["continuous"], reports["static"]
    assert [o.token_ids for o in c.outputs] == [o.token_ids for o in s.outputs]
    assert c.generated == s.generated == sum(r.params.max_tokens for r in trace)
    assert s.steps > 1.5 * c.steps
    d = c.as_dict()
    assert d["ttft_p50_s"] <= d["ttft_p99_s"] and d["itl_p50_s"] <= d["itl_p99_s"] and "tok/s" in str(c)


def test_replacement_allocator_is_used(gpt):
    class Counting(infer.BlockAllocator):
        calls = 0

        def allocate(self):
            Counting.calls += 1
            return super().allocate()

    eng = infer.LLMEngine(gpt, num_blocks=8, block_size=4, allocator=Counting(8))
    eng.generate([[1, 2, 3]], infer.SamplingParams(max_tokens=7, temperature=0))
    assert Counting.calls == 3     # 3 + 7 tokens, the last never fed back: 9 slots written, blocks at 0, 4, 8


def test_engine_on_float32_and_device(device, gpt_factory):
    m = gpt_factory(dtype=mg.float32, device=device)
    outs = infer.LLMEngine(m, num_blocks=16, block_size=4).generate(
        [[1, 2, 3], [4, 5]], infer.SamplingParams(max_tokens=5, temperature=0))
    assert [o.token_ids for o in outs] == [_alone(m, [1, 2, 3], infer.SamplingParams(max_tokens=5, temperature=0)),
                                           _alone(m, [4, 5], infer.SamplingParams(max_tokens=5, temperature=0))]
