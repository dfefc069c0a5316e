"""The parent's replays for a10: an allocator's recorded calls against reference counts, the driver that must
have issued them, the scheduler's per-step plans against the policy, and minigrad's engine as the yardstick.

Every number here comes from what the child recorded of the calls' *results*; nothing the student's
allocator or scheduler says about itself (``num_free_blocks``, ``ref_count``, ``self.log``) is taken on trust:
it is compared with what the parent computed.
"""
import numpy as np

from autograder.spec import Verdict

OPS = ("allocate", "free", "share", "copy_on_write")


def _call(i, row):
    op, arg = int(row[0]), int(row[1])
    return f"call {i + 1} ({OPS[op]}({'' if arg < 0 else arg}))"


def check_allocator_log(rows, n, what, end_empty=True):
    """(Verdict, peak blocks held) for a log of ``[op, arg, result, flag, ref(arg), ref(result), free]`` rows:
    each result against the parent's reference counts, the counts and free count the allocator reported after
    each call, and nothing held at the end."""
    refs, peak = [0] * n, 0

    def fail(i, msg):
        return Verdict.fail(f"{what}, {_call(i, rows[i])}: {msg}"), peak

    for i, row in enumerate(rows.tolist()):
        op, arg, res, flag, rarg, rres, free = row
        if op == 0:
            if not 0 <= res < n:
                return fail(i, f"allocate() returned block {res}, outside the pool (ids 0..{n - 1})")
            if refs[res]:
                return fail(i, f"allocate() returned block {res}, which is still held ({refs[res]} reference(s)): "
                               f"a block handed out twice, so two sequences would write the same keys and values; "
                               f"only a block whose count fell to 0 may be on the free list")
            refs[res] = 1
        elif op == 1:
            if not 0 <= arg < n or not refs[arg]:
                return fail(i, f"block {arg} is not held (the grader only frees what it holds)")
            refs[arg] -= 1
            if bool(flag) != (refs[arg] == 0):
                return fail(i, f"free({arg}) returned {bool(flag)}, expected {refs[arg] == 0} (True exactly when "
                               f"that was the last reference, {refs[arg]} left)")
        elif op == 2:
            if res != arg:
                return fail(i, f"share({arg}) returned {res}, expected the block itself ({arg})")
            refs[arg] += 1
        else:
            if refs[arg] == 1 and (res != arg or flag):
                return fail(i, f"copy_on_write({arg}) of a block with a single owner returned ({res}, {bool(flag)}): "
                               f"its only owner writes in place, ({arg}, False)")
            if refs[arg] > 1:
                if not flag or res == arg:
                    return fail(i, f"copy_on_write({arg}) of a block shared by {refs[arg]} owners returned ({res}, "
                                   f"{bool(flag)}): writing into it would change the others' keys and values; the "
                                   f"writer gets a new block: (new, True)")
                if not 0 <= res < n or refs[res]:
                    return fail(i, f"copy_on_write({arg}) gave the writer block {res}, which is " + (
                        f"outside the pool (ids 0..{n - 1})" if not 0 <= res < n else "still held: a block handed out twice"))
                refs[arg] -= 1
                refs[res] = 1
        for b, got in ((arg, rarg), (res, rres)):
            if 0 <= b < n and got != refs[b]:
                return fail(i, f"afterwards ref_count({b}) is {got}, expected {refs[b]}")
        live = sum(1 for r in refs if r)
        peak = max(peak, live)
        if free != n - live:
            why = ("a block whose last reference was freed did not go back on the free list" if free < n - live
                   else "blocks still held are counted as free")
            return fail(i, f"afterwards num_free_blocks is {free}, but {live} of {n} blocks are held ({n - live} "
                           f"free): {why}")
    live = [b for b in range(n) if refs[b]]
    if live and end_empty:
        return Verdict.fail(f"{what}: after the last call blocks {live} are still held: leaked"), peak
    return Verdict.ok(), peak


class _Mismatch(Exception):
    pass


class _Exhausted(Exception):
    """The recorded rows ended here: the driver's next call was ``args`` (the one that raised in the child)."""


class _Replay:
    """An allocator that answers the driver with the recorded results, and notices a call the log lacks."""

    def __init__(self, rows):
        self.rows, self.i, self.cur = rows.tolist(), 0, None

    def _next(self, op, arg):
        if self.i >= len(self.rows):
            raise _Exhausted(op, arg)
        if self.rows[self.i][0] != op or self.rows[self.i][1] != arg:
            raise _Mismatch
        self.cur = self.rows[self.i]
        self.i += 1
        return self.cur

    def allocate(self):
        return self._next(0, -1)[2]

    def free(self, b):
        return bool(self._next(1, b)[3])

    def share(self, b):
        return self._next(2, b)[2]

    def copy_on_write(self, b):
        row = self._next(3, b)
        return row[2], bool(row[3])

    def ref_count(self, b):
        return self.cur[4] if b == self.cur[1] else self.cur[5]

    @property
    def num_free_blocks(self):
        return self.cur[6]


def check_trace(obs, n, seed, steps, what):
    """A driven trace: the rows must be the calls the driver issues (else the log was forged: rejected), each
    result right; when a call raised in the child, the call is named with the error."""
    from autograder.assignments._a10_kv_cache.world import allocator_trace
    rows = np.asarray(obs.get("rows", np.zeros((0, 7))), dtype=np.int64).reshape(-1, 7)
    error, pending = error_of(obs), None
    try:
        again = allocator_trace(_Replay(rows), n, seed, steps)
        forged = again.shape != rows.shape or not (again == rows).all()
    except _Exhausted as e:
        forged, pending = bool(not error), e.args
    except (_Mismatch, IndexError, ValueError, TypeError):
        forged = True
    if forged:
        return Verdict.rejected(f"{what}: the allocator log is not the one the grader's driver issues: it was "
                                f"written or edited by hand")
    v, _ = check_allocator_log(rows, n, what, end_empty=pending is None)
    if not v.passed or pending is None:
        return v
    op, arg = pending
    return Verdict.fail(f"{what}, call {len(rows) + 1} ({OPS[op]}({'' if arg < 0 else arg})) raised {error}; every "
                        f"call before it was right, and the grader passes only blocks it holds a reference to")


# ---- requests through an engine -------------------------------------------------------------------------
def error_of(obs):
    return bytes(np.asarray(obs.get("error", []), dtype=np.uint8)).decode(errors="replace")


_ALONE, _REFS = {}, {}


def _prompts(case):
    bounds = np.cumsum(case["lens"])[:-1]
    return [q.tolist() for q in np.split(case["prompts"], bounds)]


def alone(seed, prompt, n):
    """The request decoded alone, greedily, by minigrad's ``generate`` (its KV cache equals recomputing the
    prefix in float64: tests/inference; part 1 compares with the recomputation itself)."""
    from minigrad.inference import generate
    from autograder.assignments._a10_kv_cache.world import decoder
    return generate(decoder(seed), [list(prompt)], n, temperature=0).numpy()[0, len(prompt):].tolist()


def check_outputs(case, obs):
    """Each request's tokens against the same request decoded alone."""
    counts = np.asarray(obs.get("counts", []), dtype=np.int64)
    tokens = np.asarray(obs.get("tokens", []), dtype=np.int64)
    prompts, seed = _prompts(case), case.params["seed"]
    error, steps = error_of(obs), int(obs.get("steps", 0))
    if error:
        return Verdict.fail(f"the engine stopped at step {steps}: {error}")
    if counts.shape == (len(prompts),) and (counts == 0).any():
        return Verdict.fail(f"requests {np.flatnonzero(counts == 0).tolist()} had not finished after {steps} steps "
                            f"(are finished requests' blocks freed, and waiting ones admitted when blocks free up?)")
    if counts.shape != (len(prompts),) or counts.sum() != tokens.size:
        return Verdict.fail(f"outputs of {counts.size} requests, expected {len(prompts)}")
    got = np.split(tokens, np.cumsum(counts)[:-1])
    for i, (q, m) in enumerate(zip(prompts, case["max_tokens"].tolist())):
        key = (seed, tuple(q), m)
        if key not in _ALONE:
            _ALONE[key] = alone(seed, q, m)
        want, have = _ALONE[key], got[i].tolist()
        if have != want:
            if len(have) != len(want):
                return Verdict.fail(f"request {i} produced {len(have)} tokens, expected max_tokens={m} (it never "
                                    f"finished, or finished early)")
            t = next(j for j in range(m) if have[j] != want[j])
            return Verdict.fail(f"request {i}: token {t} is {have[t]}, but {want[t]} when it runs alone (the "
                                f"tokens before agree): its keys and values were overwritten or lost in the batch")
    return Verdict.ok()


def reference_run(case, decoder):
    """minigrad's allocator and scheduler on the same requests: {"steps", "peak"} (peak over every call)."""
    from minigrad.inference import BlockAllocator, LLMEngine, SamplingParams
    from autograder.assignments._a10_kv_cache.world import _Recorder
    p = case.params
    key = tuple(sorted((k, v) for k, v in p.items() if not isinstance(v, list)))
    if key not in _REFS:
        rec = _Recorder(BlockAllocator(p["blocks"]), p["blocks"])
        engine = LLMEngine(decoder(p["seed"]), num_blocks=p["blocks"], block_size=p["block_size"],
                           max_num_seqs=p["seats"], allocator=rec)
        engine.generate(_prompts(case), [SamplingParams(max_tokens=int(m), temperature=0)
                                         for m in case["max_tokens"]])
        _, peak = check_allocator_log(np.array(rec.rows, dtype=np.int64).reshape(-1, 7), p["blocks"], "reference")
        _REFS[key] = {"steps": engine.counters["steps"], "peak": peak}
    return _REFS[key]


# ---- the scheduler's plans ------------------------------------------------------------------------------
def parse_plans(flat):
    """[(prefill ids, decode ids, preempted ids, free blocks)] per step from the child's flat array."""
    out, step = [], []
    for x in np.asarray(flat, dtype=np.int64).tolist():
        if x == -2:
            if len(step) == 4:
                out.append((step[0], step[1], step[2], step[3][0] if step[3] else -1))
            step = []
            continue
        if not step:
            step = [[]]
        if x == -1:
            step.append([])
        else:
            step[-1].append(x)
    return out


def _admission(t, got, expected, waiting, running, held, length, n, seats, bs):
    blocks = lambda k: -(-k // bs)                                     # noqa: E731
    free = n - sum(held)
    missing = [h for h in expected if h not in got]
    extra = [h for h in waiting if h in got and h not in expected] + [h for h in got if h not in waiting]
    if missing and not extra:
        h = missing[0]
        before = expected[:expected.index(h)]
        left = free - sum(blocks(length[b]) for b in before)
        return (f"step {t}: request {h} was first in line and fits (it needs {blocks(length[h])} blocks, {left} "
                f"were free, {len(running) + len(before)} of {seats} seats taken) but was not admitted: admit() "
                f"keeps admitting while seats and blocks allow (continuous batching: new requests join the running "
                f"batch)")
    h = extra[0]
    if h not in waiting:
        return f"step {t}: request {h} was admitted but was not waiting"
    pos = waiting.index(h)
    ahead = [w for w in waiting[:pos] if w not in got]
    if ahead:
        return (f"step {t}: request {h} was admitted before request {ahead[0]}, which was waiting ahead of it: first "
                f"come, first served (a request that does not fit stops admission; preempted requests wait first)")
    before = [w for w in waiting[:pos]]
    if len(running) + len(before) >= seats:
        return f"step {t}: request {h} was admitted with all {seats} seats (max_num_seqs) taken"
    left = free - sum(blocks(length[b]) for b in before)
    return (f"step {t}: request {h} was admitted although it needs {blocks(length[h])} blocks for its "
            f"{length[h]} tokens and only {left} were free: ask manager.can_allocate first")


def replay_schedule(case, plans, error="", max_prefill_tokens=2048):
    """The first step whose plan differs from the policy, from the state the plans so far lead to."""
    p = case.params
    n, bs, seats = p["blocks"], p["block_size"], p["seats"]
    length, maxt = case["lens"].tolist(), case["max_tokens"].tolist()
    k = len(length)
    out, held, waiting, running = [0] * k, [0] * k, list(range(k)), []
    blocks = lambda m: -(-m // bs)                                     # noqa: E731
    for t, (pre, dec, pem, free_rec) in enumerate(plans):
        expected, f, tokens = [], n - sum(held), 0
        while len(expected) < len(waiting) and len(running) + len(expected) < seats:
            h = waiting[len(expected)]
            if (expected and tokens + length[h] > max_prefill_tokens) or blocks(length[h]) > f:
                break
            expected.append(h)
            f, tokens = f - blocks(length[h]), tokens + length[h]
        got = set(pre) | (set(pem) & set(waiting))
        if got != set(expected):
            return Verdict.fail(_admission(t, got, expected, waiting, running, held, length, n, seats, bs))
        candidates = list(running)
        for h in expected:
            waiting.remove(h)
            running.append(h)
            held[h] = blocks(length[h])
        free, want_dec, want_pem = n - sum(held), [], []
        for c in candidates:
            if c not in running:
                continue
            need = 1 if (length[c] - 1) // bs == held[c] else 0
            while need > free:
                v = running.pop()
                free, held[v] = free + held[v], 0
                waiting.insert(0, v)
                want_pem.append(v)
                if v == c:
                    break
            else:
                want_dec.append(c)
                held[c] += need
                free -= need
        if pem != want_pem:
            odd = [v for v in pem if v not in want_pem]
            if not want_pem:
                return Verdict.fail(f"step {t}: preempted {pem} although the decoding sequences needed blocks that "
                                    f"were free: preempt only when a decoding sequence needs a block and none is free")
            if odd:
                return Verdict.fail(f"step {t}: preempted {pem}, expected {want_pem}: when blocks run out, preempt the "
                                    f"newest running request (the last admitted), so the oldest finish and free "
                                    f"their blocks")
            return Verdict.fail(f"step {t}: preempted {pem}, expected {want_pem} (newest first)")
        if set(dec) != set(want_dec):
            lost = [c for c in want_dec if c not in dec]
            if lost:
                return Verdict.fail(f"step {t}: request {lost[0]} is running but did not decode: every running "
                                    f"sequence decodes one token per step (make_room returns them all)")
            return Verdict.fail(f"step {t}: decoded {sorted(set(dec) - set(want_dec))}, which were not running "
                                f"before this step (a request admitted this step is prefilled, not decoded)")
        if free_rec != n - sum(held):
            return Verdict.fail(f"step {t}: after scheduling, the pool has {free_rec} free blocks; the plan leaves "
                                f"{n - sum(held)}: admit() must allocate (manager.allocate) and make_room() reserve the "
                                f"next slot (manager.append_slot) of every decoding sequence")
        for s in [h for h in expected if h not in pem] + want_dec:
            out[s] += 1
            length[s] += 1
            if out[s] >= maxt[s]:
                running.remove(s)
                held[s] = 0
    if error:
        return Verdict.fail(f"every plan up to step {len(plans) - 1} follows the policy, then the engine stopped: {error}")
    if waiting or running:
        return Verdict.fail(f"after {len(plans)} steps requests {sorted(waiting + running)} had not finished")
    return Verdict.ok(f"{len(plans)} steps")
