"""a10_kv_cache: the student writes a KV cache, the paged cache's block allocator and the continuous-batching
scheduler's two decisions (lecture 12).

  part1  KVCache, LayerCache           incremental decoding: logits and greedy tokens equal recomputing the
                                        whole prefix (float64), chunks of new tokens after cached ones
  part2  BlockAllocator                 allocate / free / share / copy_on_write with reference counts
  part3  ContinuousScheduler            admit() and make_room() of minigrad's Scheduler

How each part is judged (in the parent; the child runs the student's code and returns arrays):
- cache: the child feeds a seeded float64 decoder the tokens chunk by chunk through the student's cache; the
  parent runs the same decoder on the whole sequence without a cache and compares every position's logits,
  naming the first wrong position and what it suggests (positions, the causal mask of a chunk).
- allocator: the child drives the student's allocator through a seeded random trace (``allocator_trace``,
  its decisions depend only on the seed and on what the allocator returned) and records every result. The
  parent reruns the driver on the recorded results (a log the driver would not have written is refused)
  and replays the log against reference counts of its own: no block handed out while held, counts and the
  free count right after every call, nothing leaked at the end. In the engine, every call minigrad's block
  manager makes is recorded by a proxy the grader puts in front of the student's allocator; the parent
  replays that log too, so nothing the allocator says about itself is trusted; outputs must equal each
  request run alone and the peak of blocks held must not exceed minigrad's allocator's.
- scheduler: minigrad's engine runs the student's scheduler; the grader's subclass records each step's
  plan (what the engine prefilled, decoded, preempted) and the pool's free blocks. The parent replays the
  plan against the policy from the state it reconstructs (first come first served admission while seats and
  blocks allow, every running sequence decodes, the newest is preempted only when blocks run out) and names
  the first step that differs. Outputs equal to each request alone are credited only to a scheduler that
  batches; throughput (steps) is compared with minigrad's scheduler in the parent.

No solution code lives here: expected values come from the decoder run without a cache, reference counts
the parent keeps, and minigrad's own engine run in the parent.
"""
import numpy as np

from autograder.assignments._a10_kv_cache.world import (VOCAB, _CacheProbe, _Recorder, allocator_trace, decoder,
                                                       full_logits, greedy_alone, inputs_requests, serve,
                                                       text)
from autograder.spec import Assignment, Case, Part, Test, Verdict

TOL = dict(rtol=1e-10, atol=1e-12)


# ---- part 1: the KV cache -------------------------------------------------------------------------------
def inputs_cache(p):
    rng = np.random.default_rng(p["seed"])
    T = p.get("prompt", sum(p.get("chunks", [0])))
    return {"ids": rng.integers(0, VOCAB, (p["N"], T)).astype(np.int64)}


def observe_cache(ns, case):
    """Teacher forcing: the tokens fed chunk by chunk; every chunk's logits, the positions the cache gave, and
    per layer how many distinct objects layer(i) returned (and how many in all)."""
    import minigrad as mg
    p = case.params
    model, ids = decoder(p["seed"]), case["ids"]
    probe, outs, start = _CacheProbe(ns.KVCache(len(model.blocks))), [], 0
    with mg.no_grad():
        for L in p["chunks"]:
            outs.append(np.asarray(model(mg.tensor(ids[:, start:start + L]), kv_cache=probe).numpy(), np.float64))
            start += L
    layers = [len(set(v)) for _, v in sorted(probe.layers.items())]
    return {"logits": np.concatenate(outs, axis=1), "positions": np.array(probe.positions, dtype=np.int64),
            "layers": np.array(layers + [len({x for v in probe.layers.values() for x in v})], dtype=np.int64)}


def _check_protocol(p, obs):
    """Positions and per-layer caches: the two mistakes the logits alone would only hint at."""
    pos, want = np.asarray(obs.get("positions", [])), np.arange(sum(p["chunks"]))
    if pos.shape != want.shape or (pos != want).any():
        start = 0
        for L in p["chunks"]:
            if pos.shape != want.shape or (pos[start:start + L] != want[start:start + L]).any():
                return Verdict.fail(f"KVCache.position_ids({L}) after {start} cached tokens gave "
                                    f"{pos[start:start + L].tolist()}, expected {want[start:start + L].tolist()}: the "
                                    f"positions of new tokens continue after the cached ones")
            start += L
    layers = np.asarray(obs.get("layers", [])).tolist()
    n = len(layers) - 1
    if any(k != 1 for k in layers[:-1]):
        return Verdict.fail("KVCache.layer(i) returned a different object from one forward to the next: each layer's "
                            "cache must live as long as the KVCache")
    if n > 0 and layers[-1] != n:
        return Verdict.fail(f"KVCache.layer(i) returned {layers[-1]} object(s) for {n} layers: each layer keeps its "
                            f"own keys and values (one LayerCache per layer)")
    return Verdict.ok()


def _chunk_of(chunks, t):
    start = 0
    for L in chunks:
        if t < start + L:
            return start, L
        start += L
    return start, 0


def verdict_cache(case, obs, ctx):
    p = case.params
    v = _check_protocol(p, obs)
    if not v.passed:
        return v
    want = full_logits(p["seed"], case["ids"])
    got = obs.get("logits")
    if got is None or np.shape(got) != want.shape:
        return Verdict.fail(f"KVCache: the logits of the chunks {p['chunks']} have shape {np.shape(got)}, expected "
                            f"{want.shape} (N, T, vocab): does attend return (N, H, L, D) for the L new tokens?")
    bad = ~np.isclose(got, want, **TOL).all(axis=(0, 2))
    if not bad.any():
        return Verdict.ok()
    t = int(np.argmax(bad))
    start, L = _chunk_of(p["chunks"], t)
    err = float(np.abs(got[:, t] - want[:, t]).max())
    where = f"KVCache (chunks {p['chunks']}): logits at position {t} differ from recomputing the whole prefix " \
            f"by {err:.3g}; position {t} is in the chunk of {L} tokens fed after {start} cached ones"
    if start == 0:
        hint = "the first chunk is wrong: does attend apply the causal mask (token i sees keys 0..i)?"
    elif L > 1:
        hint = ("a chunk of several new tokens after cached ones is wrong: new query i sits at position S - L + i, "
                "so the causal mask is aligned to the bottom right (query i sees keys j <= S - L + i)")
    else:
        hint = ("the first chunk is right, a token decoded after it is not: does the new query see every cached "
                "key (the mask of 1 query over S keys keeps all S), and are the keys and values appended along "
                "the positions axis (N, H, S, D)?")
    return Verdict.fail(f"{where}: {hint}")


def observe_greedy(ns, case):
    """Greedy decoding through the student's cache: the prompt in one forward, then one token per forward."""
    import minigrad as mg
    p = case.params
    model, prompt = decoder(p["seed"]), case["ids"]
    probe, out = _CacheProbe(ns.KVCache(len(model.blocks))), []
    with mg.no_grad():
        logits = model(mg.tensor(prompt), kv_cache=probe).numpy()
        for _ in range(p["new"]):
            nxt = np.argmax(logits[:, -1], axis=-1).astype(np.int64)
            out.append(nxt)
            logits = model(mg.tensor(nxt[:, None]), kv_cache=probe).numpy()
    layers = [len(set(v)) for _, v in sorted(probe.layers.items())]
    return {"tokens": np.stack(out, axis=1), "positions": np.array(probe.positions, dtype=np.int64),
            "layers": np.array(layers + [len({x for v in probe.layers.values() for x in v})], dtype=np.int64)}


def verdict_greedy(case, obs, ctx):
    p = case.params
    v = _check_protocol({"chunks": [p["prompt"]] + [1] * p["new"]}, obs)
    if not v.passed:
        return v
    want = np.array([greedy_alone(p["seed"], row, p["new"]) for row in case["ids"].tolist()], dtype=np.int64)
    got = np.asarray(obs.get("tokens", np.zeros((0,))))
    if got.shape != want.shape:
        return Verdict.fail(f"greedy decoding through KVCache: {got.shape} tokens, expected {want.shape}")
    if (got == want).all():
        return Verdict.ok()
    r, t = (int(i) for i in np.argwhere(got != want)[0])
    return Verdict.fail(f"greedy decoding through KVCache: row {r}, new token {t} is {int(got[r, t])}; recomputing "
                        f"the whole prefix gives {int(want[r, t])} (tokens {want[r, :t].tolist()} before it agree)")


# ---- part 2: the block allocator ------------------------------------------------------------------------
def _traced(ns, n, seed, steps):
    """The driver on a new student allocator: {"rows", "error"} (the error of the call that raised, if any)."""
    rows, error = [], ""
    try:
        allocator_trace(ns.BlockAllocator(n), n, seed, steps, rows)
    except Exception as e:                 # noqa: BLE001 - the parent names the call that raised
        error = f"{type(e).__name__}: {e}"
    return {"rows": np.array(rows, dtype=np.int64).reshape(-1, 7), "error": text(error)}


def observe_trace(ns, case):
    p = case.params
    return _traced(ns, p["n"], p["seed"], p["steps"])


def verdict_trace(case, obs, ctx):
    from autograder.assignments._a10_kv_cache.replay import check_trace
    p = case.params
    return check_trace(obs, p["n"], p["seed"], p["steps"], f"trace (seed {p['seed']}, {p['n']} blocks)")


_RAISED = ("no error", "OutOfMemoryError", "ValueError", "another error")


def _raised(fn):
    import minigrad as mg
    try:
        fn()
    except mg.OutOfMemoryError:        # minigrad's (NoFreeBlocksError is one); a MemoryError is not
        return 1
    except ValueError:                 # minigrad's ArgumentError is one
        return 2
    except Exception:                  # noqa: BLE001 - the verdict names what was expected
        return 3
    return 0


def observe_errors(ns, case):
    p = case.params
    trace = _traced(ns, p["n"], p["seed"], 30)                 # the behaviour the test presumes
    a = ns.BlockAllocator(p["n"])
    got = [int(a.allocate()) for _ in range(p["n"])]
    full = _raised(a.allocate)
    a.free(got[0])
    twice = _raised(lambda: a.free(got[0]))
    share_free = _raised(lambda: a.share(got[0]))
    return {**trace, "ids": np.array(got, dtype=np.int64), "raised": np.array([full, twice, share_free])}


def verdict_errors(case, obs, ctx):
    from autograder.assignments._a10_kv_cache.replay import check_trace
    p = case.params
    v = check_trace(obs, p["n"], p["seed"], 30, "a short trace")
    if not v.passed:
        return Verdict.fail(f"errors are credited only to an allocator that works: {v.message}")
    ids = np.asarray(obs.get("ids", []))
    if sorted(ids.tolist()) != list(range(p["n"])):
        return Verdict.fail(f"allocate() {p['n']} times on a fresh pool of {p['n']} gave {ids.tolist()}: expected "
                            f"every block once")
    full, twice, share_free = (int(x) for x in obs["raised"])
    if full != 1:
        return Verdict.fail(f"allocate() on a full pool: {_RAISED[full]}; expected minigrad's OutOfMemoryError "
                            f"(raise OutOfMemoryError(...): the scheduler preempts before it happens)")
    if twice != 2:
        return Verdict.fail(f"free() of a block that is already free: {_RAISED[twice]}; expected a ValueError "
                            f"(ArgumentError) naming the block: a double free must never put it on the list twice")
    if share_free != 2:
        return Verdict.fail(f"share() of a free block: {_RAISED[share_free]}; expected a ValueError (ArgumentError)")
    return Verdict.ok()


def observe_engine_allocator(ns, case):
    from minigrad.inference import LLMEngine
    p = case.params
    rec = _Recorder(ns.BlockAllocator(p["blocks"]), p["blocks"])
    engine = LLMEngine(decoder(p["seed"]), num_blocks=p["blocks"], block_size=p["block_size"],
                       max_num_seqs=p["seats"], allocator=rec)
    out = serve(engine, case, 400)
    return {**out, "rows": np.array(rec.rows, dtype=np.int64).reshape(-1, 7)}


def verdict_engine_allocator(case, obs, ctx):
    from autograder.assignments._a10_kv_cache.replay import check_allocator_log, check_outputs, reference_run
    p = case.params
    rows = np.asarray(obs.get("rows", np.zeros((0, 7))), dtype=np.int64).reshape(-1, 7)
    v, peak = check_allocator_log(rows, p["blocks"], "in the engine")
    if not v.passed:
        return v
    v = check_outputs(case, obs)
    if not v.passed:
        return v
    ref = reference_run(case, decoder)
    if peak > ref["peak"]:
        return Verdict.fail(f"in the engine your allocator held {peak} blocks at its peak, minigrad's {ref['peak']} "
                            f"on the same requests: blocks are held longer than needed (is a block whose last "
                            f"reference is freed back on the free list at once?)")
    return Verdict.ok(f"peak {peak} blocks (minigrad's {ref['peak']})")


# ---- part 3: the scheduler ------------------------------------------------------------------------------
def observe_scheduler(ns, case):
    from minigrad.inference import BlockAllocator, LLMEngine
    p = case.params
    plans = []

    class Recorded(ns.ContinuousScheduler):
        """What the engine will run this step, as the plan says, and the pool's free blocks after it."""

        def schedule(self):
            plan = super().schedule()
            plans.append([[s.seq_id for s in plan.prefill], [s.seq_id for s in plan.decode],
                          [s.seq_id for s in plan.preempted], self.manager.allocator.num_free_blocks])
            return plan

    engine = LLMEngine(decoder(p["seed"]), num_blocks=p["blocks"], block_size=p["block_size"],
                       max_num_seqs=p["seats"], allocator=BlockAllocator(p["blocks"]), scheduler_cls=Recorded)
    out = serve(engine, case, p.get("max_steps", 300))
    flat = []            # per step: -1-separated prefill, decode, preempted ids, then the free blocks
    for pre, dec, pem, free in plans:
        flat += pre + [-1] + dec + [-1] + pem + [-1, free, -2]
    return {**out, "plans": np.array(flat, dtype=np.int64)}


def verdict_outputs(case, obs, ctx):
    from autograder.assignments._a10_kv_cache.replay import check_outputs, parse_plans
    plans = parse_plans(obs.get("plans", []))
    if not any(len(dec) + len(pre) >= 2 for pre, dec, _, _ in plans):
        return Verdict.fail("outputs equal to running each request alone are credited only to a scheduler that "
                            "batches: no step ran more than one sequence")
    return check_outputs(case, obs)


def verdict_policy(case, obs, ctx):
    from autograder.assignments._a10_kv_cache.replay import error_of, parse_plans, replay_schedule
    return replay_schedule(case, parse_plans(obs.get("plans", [])), error_of(obs))


def verdict_throughput(case, obs, ctx):
    from autograder.assignments._a10_kv_cache.replay import check_outputs, parse_plans, reference_run
    v = check_outputs(case, obs)
    if not v.passed:
        return Verdict.fail(f"throughput is credited only to a scheduler whose outputs are right: {v.message}")
    steps, ref = len(parse_plans(obs.get("plans", []))), reference_run(case, decoder)["steps"]
    if steps > 1.1 * ref:
        return Verdict.fail(f"your scheduler took {steps} steps for these requests, minigrad's {ref} (budget "
                            f"{1.1 * ref:.0f}): admit while seats and blocks allow, decode every running sequence")
    return Verdict.ok(f"{steps} steps (minigrad's {ref})")


# ---- cases and the assignment ---------------------------------------------------------------------------
def _c(label, **p):
    return Case(p, label=label)


def _req(seed, requests, blocks, block_size, seats, **extra):
    return dict(seed=seed, requests=requests, blocks=blocks, block_size=block_size, seats=seats, **extra)


# the library's caches, allocator and scheduler decisions, the engine's reference runs, and PyTorch
FORBIDDEN = ["minigrad.inference.kv_cache", "minigrad.inference.KVCache", "minigrad.inference.LayerKVCache",
             "minigrad.inference.block_allocator", "minigrad.inference.BlockAllocator",
             "minigrad.inference.block_manager", "minigrad.inference.BlockManager", "minigrad.inference.generate",
             "minigrad.inference.LLMEngine", "minigrad.inference.engine", "torch"]
STUBS_CACHE = ["minigrad.inference.kv_cache.LayerKVCache", "minigrad.inference.kv_cache.KVCache",
               "minigrad.inference.generate.generate"]
STUBS_ALLOCATOR = ["minigrad.inference.block_allocator.BlockAllocator"]
STUBS_SCHEDULER = ["minigrad.inference.scheduler.Scheduler.admit", "minigrad.inference.scheduler.Scheduler.make_room"]

ASSIGNMENT = Assignment(
    id="a10", name="a10_kv_cache", title="The KV cache, the block allocator and continuous batching",
    notebook="a10_kv_cache.ipynb", solution="solutions/a10_kv_cache.ipynb",
    preamble=("import numpy as np\nimport minigrad as mg\nfrom minigrad.nn import functional as F\n"
              "from minigrad.errors import ArgumentError, OutOfMemoryError\n"
              "from minigrad.inference import Scheduler, Status\n"),
    timeout=60, memory_mb=2048, forbidden=FORBIDDEN,
    summary="logits of a float64 decoder fed chunk by chunk through the student's KV cache vs recomputing the "
            "whole prefix, greedy tokens equal; the allocator's calls on seeded random traces and inside "
            "minigrad's engine replayed by the parent (no block handed out twice, reference counts, nothing "
            "leaked, peak blocks <= minigrad's); the scheduler's per-step plans replayed against the policy "
            "(admission while blocks allow, the newest preempted), outputs equal to each request alone, steps "
            "<= 1.1x minigrad's",
    parts=[
        Part("part1", "The KV cache", cells=["a10-cache"], names=["LayerCache", "KVCache"], stubs=STUBS_CACHE,
             objective="incremental decoding equals recomputing the prefix", tests=[
                 Test("decoding equals recomputation", 10, observe_cache, verdict_cache, inputs_cache, partial=True,
                      cases=[_c("N=1, prompt 5 then 6 single tokens", seed=1, N=1, chunks=[5, 1, 1, 1, 1, 1, 1]),
                             _c("N=2, prompt 3 then 5 single tokens", seed=2, N=2, chunks=[3, 1, 1, 1, 1, 1])]),
                 Test("chunks after cached tokens", 10, observe_cache, verdict_cache, inputs_cache, partial=True,
                      cases=[_c("N=2, chunks 3, 4, 1, 5", seed=3, N=2, chunks=[3, 4, 1, 5]),
                             _c("N=1, chunks 1, 6, 2", seed=4, N=1, chunks=[1, 6, 2])]),
                 Test("greedy tokens equal recomputation", 10, observe_greedy, verdict_greedy, inputs_cache,
                      cases=[_c("N=2, prompt 4, 10 new tokens", seed=5, N=2, prompt=4, new=10)]),
             ]),
        Part("part2", "The block allocator", cells=["a10-allocator"], names=["BlockAllocator"],
             stubs=STUBS_ALLOCATOR, objective="free list and reference counts; copy-on-write", tests=[
                 Test("random traces", 15, observe_trace, verdict_trace, partial=True,
                      cases=[_c("8 blocks, 120 calls", seed=11, n=8, steps=120),
                             _c("3 blocks, 80 calls", seed=12, n=3, steps=80),
                             _c("32 blocks, 300 calls", seed=13, n=32, steps=300)]),
                 Test("a full pool and bad frees raise", 5, observe_errors, verdict_errors,
                      cases=[_c("4 blocks", seed=14, n=4)]),
                 Test("in the engine", 15, observe_engine_allocator, verdict_engine_allocator, inputs_requests,
                      partial=True,
                      cases=[_c("shared prefixes, 12 blocks of 4", **_req(17, 8, 12, 4, 4, shared=True)),
                             _c("shared prefixes, 9 blocks of 4: preemption", **_req(18, 7, 9, 4, 4, shared=True))]),
             ]),
        Part("part3", "Continuous batching", cells=["a10-scheduler"], names=["ContinuousScheduler"],
             stubs=STUBS_SCHEDULER, objective="admit while blocks allow; preempt the newest", tests=[
                 Test("outputs equal running alone", 10, observe_scheduler, verdict_outputs, inputs_requests,
                      partial=True,
                      cases=[_c("8 requests, roomy pool", **_req(21, 8, 40, 4, 4)),
                             _c("8 requests, 12 blocks: preemption", **_req(22, 8, 12, 4, 4))]),
                 Test("the step log replays the policy", 20, observe_scheduler, verdict_policy, inputs_requests,
                      partial=True,
                      cases=[_c("8 requests, roomy pool", **_req(21, 8, 40, 4, 4)),
                             _c("8 requests, 12 blocks: preemption", **_req(22, 8, 12, 4, 4)),
                             _c("10 requests, 3 seats", **_req(23, 10, 30, 2, 3))]),
                 Test("throughput", 5, observe_scheduler, verdict_throughput, inputs_requests,
                      cases=[_c("12 requests, mixed lengths", **_req(26, 12, 60, 4, 4, max_new=40))]),
             ]),
    ],
)
