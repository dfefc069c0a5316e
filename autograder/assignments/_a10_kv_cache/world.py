"""The world a10's tests run in, child and parent alike: the seeded decoder, the request mixes, the driver of
random allocator traces, and the grader's proxies between minigrad and the student's objects (a cache probe, an
allocator recorder). Nothing here is a solution: the proxies pass calls on and write down what came back."""
import numpy as np

VOCAB, CONTEXT, D_MODEL, N_LAYER, N_HEAD = 29, 64, 16, 2, 2


# ---- the decoder (child and parent build the same one) --------------------------------------------------
_CLASSES = {}


def decoder(seed):
    """A seeded float64 GPT-style decoder whose forward takes ``kv_cache=`` (the protocol of lecture 12)."""
    import minigrad as mg
    from minigrad import nn
    if "Decoder" not in _CLASSES:
        class Decoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.block_size = CONTEXT
                self.tok_emb, self.pos_emb = nn.Embedding(VOCAB, D_MODEL), nn.Embedding(CONTEXT, D_MODEL)
                self.blocks = nn.ModuleList([nn.TransformerBlock(D_MODEL, N_HEAD, causal=True)
                                             for _ in range(N_LAYER)])
                self.ln_f, self.head = nn.LayerNorm(D_MODEL), nn.Linear(D_MODEL, VOCAB)

            def forward(self, idx, kv_cache=None):
                T = idx.shape[1]
                pos = mg.arange(T) if kv_cache is None else kv_cache.position_ids(T)
                x = self.tok_emb(idx) + self.pos_emb(pos)
                for i, block in enumerate(self.blocks):
                    x = block(x, kv_cache=None if kv_cache is None else kv_cache.layer(i))
                return self.head(self.ln_f(x))
        _CLASSES["Decoder"] = Decoder
    mg.manual_seed(seed)
    return _CLASSES["Decoder"]().double().eval()


def full_logits(seed, ids):
    """Parent: the decoder on the whole sequence, no cache: (N, T, VOCAB) float64."""
    import minigrad as mg
    with mg.no_grad():
        return decoder(seed)(mg.tensor(np.asarray(ids), dtype=mg.int64)).numpy()


def greedy_alone(seed, prompt, n):
    """Parent: n greedy tokens after ``prompt``, recomputing the whole prefix each step."""
    ids = list(prompt)
    for _ in range(n):
        ids.append(int(np.argmax(full_logits(seed, [ids])[0, -1])))
    return ids[len(prompt):]


class _CacheProbe:
    """Grader-side, between the model and the student's cache: passes every call on, noting the positions
    ``position_ids`` gave and which object ``layer(i)`` returned."""

    def __init__(self, cache):
        self._cache, self.positions, self.layers = cache, [], {}

    def position_ids(self, L):
        pos = self._cache.position_ids(L)
        self.positions += np.asarray(pos.numpy() if hasattr(pos, "numpy") else pos).reshape(-1, L)[0].tolist()
        return pos

    def layer(self, i):
        obj = self._cache.layer(i)
        self.layers.setdefault(i, []).append(id(obj))
        return obj


def allocator_trace(alloc, n, seed, steps, rows=None):
    """Drive an allocator of ``n`` blocks through ``steps`` seeded random calls, then free everything it holds.

    The driver holds references (a list of block ids, one entry per reference) and decides only from the seed
    and what the calls returned, so the parent reruns it on the recorded results. Rows:
    ``[op, arg, result, flag, ref_count(arg), ref_count(result), num_free_blocks]`` after each call (flag:
    free returned True / copy_on_write copied). ``rows``: a list the rows are appended to as they happen (what
    was done before a call raised)."""
    rng = np.random.default_rng(seed)
    held, rows = [], [] if rows is None else rows

    def record(op, arg, res, flag):
        rows.append([op, arg, res, int(bool(flag)), int(alloc.ref_count(arg)) if arg >= 0 else -1,
                     int(alloc.ref_count(res)) if res >= 0 else -1, int(alloc.num_free_blocks)])

    for _ in range(steps):
        room, r = len(set(held)) < n, rng.random()
        if not held or (room and r < 0.35):
            b = int(alloc.allocate())
            held.append(b)
            record(0, -1, b, 0)
        elif r < 0.6 or (r >= 0.8 and not room):       # copy_on_write may need a free block
            b = held.pop(int(rng.integers(len(held))))
            record(1, b, -1, alloc.free(b))
        elif r < 0.8:
            b = held[int(rng.integers(len(held)))]
            held.append(int(alloc.share(b)))
            record(2, b, held[-1], 0)
        else:
            k = int(rng.integers(len(held)))
            b = held[k]
            new, copied = alloc.copy_on_write(b)
            held[k] = int(new)
            record(3, b, held[k], copied)
    for k in rng.permutation(len(held)):
        record(1, held[k], -1, alloc.free(held[k]))
    return np.array(rows, dtype=np.int64).reshape(-1, 7)


def text(s):
    """A message as an array the parent can read back (observations are arrays only)."""
    return np.frombuffer(str(s)[:600].encode(), dtype=np.uint8)


class _Recorder:
    """Grader-side proxy between minigrad's block manager and the student's allocator: every call and its
    result is logged in ``allocator_trace``'s row format; what the allocator says of itself is passed on."""

    def __init__(self, alloc, n):
        self._alloc, self.num_blocks, self.rows = alloc, n, []

    def _log(self, op, arg, res, flag):
        a = self._alloc
        self.rows.append([op, arg, res, int(bool(flag)), int(a.ref_count(arg)) if arg >= 0 else -1,
                          int(a.ref_count(res)) if res >= 0 else -1, int(a.num_free_blocks)])

    def allocate(self):
        b = int(self._alloc.allocate())
        self._log(0, -1, b, 0)
        return b

    def free(self, b):
        last = self._alloc.free(b)
        self._log(1, b, -1, last)
        return bool(last)

    def share(self, b):
        s = int(self._alloc.share(b))
        self._log(2, b, s, 0)
        return s

    def copy_on_write(self, b):
        new, copied = self._alloc.copy_on_write(b)
        self._log(3, b, int(new), copied)
        return int(new), bool(copied)

    def ref_count(self, b):
        return self._alloc.ref_count(b)

    @property
    def num_free_blocks(self):
        return self._alloc.num_free_blocks


def inputs_requests(p):
    """Prompts (a ragged batch, flattened with their lengths) and max_tokens. ``shared``: prompts share prefixes
    (and two are equal), so blocks are shared and copied on write; otherwise every prompt starts with its own
    token, so no two share a block."""
    rng = np.random.default_rng(p["seed"])
    k = p["requests"]
    lens = rng.integers(p.get("min_prompt", 2), p.get("max_prompt", 11), k)
    prompts = [rng.integers(0, VOCAB, int(n)) for n in lens]
    if p.get("shared"):
        base = rng.integers(0, VOCAB, 9)
        prompts = [np.concatenate([base[:int(rng.integers(4, 10))], q[:3]]) for q in prompts]
        prompts[1] = prompts[0].copy()
    else:
        for i, q in enumerate(prompts):
            q[0] = i
    return {"prompts": np.concatenate(prompts).astype(np.int64),
            "lens": np.array([len(q) for q in prompts], dtype=np.int64),
            "max_tokens": rng.integers(p.get("min_new", 2), p.get("max_new", 14), k).astype(np.int64)}


def split_prompts(case):
    bounds = np.cumsum(case["lens"])[:-1]
    return [q.tolist() for q in np.split(case["prompts"], bounds)]


def serve(engine, case, max_steps):
    """Run the requests through the engine, one step at a time, at most ``max_steps``: {"tokens", "counts",
    "steps", "error"} (what was produced before a step raised, and the error)."""
    from minigrad.inference import SamplingParams
    prompts = split_prompts(case)
    outs, steps, error = {}, 0, ""
    try:
        for i, (q, m) in enumerate(zip(prompts, case["max_tokens"])):
            engine.add_request(q, SamplingParams(max_tokens=int(m), temperature=0), request_id=i)
        while engine.has_unfinished() and steps < max_steps:
            steps += 1
            for o in engine.step():
                outs[o.request_id] = o.token_ids
    except Exception as e:                 # noqa: BLE001 - the parent reports it after what it can name
        error = f"{type(e).__name__}: {e}"
    return {"tokens": np.array([t for i in range(len(prompts)) for t in outs.get(i, [])], dtype=np.int64),
            "counts": np.array([len(outs.get(i, [])) for i in range(len(prompts))], dtype=np.int64),
            "steps": np.array(steps), "error": text(error)}
