"""The verdicts of a2 (parent): layouts against minigrad's allocator, budgets, out-of-memory behaviour."""
import numpy as np

from autograder import verdicts as V
from autograder.spec import Verdict

from .log_reader import REUSE_ADVICE, _Log, _free_range, _load, _nbytes, _pool, _reuse_hint, _rounded
from .reference import _MINIGRAD_INPUTS, _minigrad_reference, _ref_for
from .trace_device import ALIGN, BAD_RETURN, EMPTY, MALLOC, OK, OOM, OTHER_OOM, MiB

BUDGET = 1.25                 # x the reference's peak reserved bytes and average unused bytes


def verdict_round(case, obs, ctx):
    from minigrad.memory.allocator import round_size
    req = case["requests"].tolist()
    exp = [round_size(n) for n in req]
    got = np.asarray(obs.get("round"))
    if got.shape != (len(req),):
        return Verdict.fail(f"round_size: expected {len(req)} sizes, got an array of shape {got.shape}")
    bad = [i for i in range(len(req)) if int(got[i]) != exp[i]]
    if bad:
        i = bad[0]
        return Verdict.fail(f"round_size({req[i]}) returned {int(got[i])}, expected {exp[i]} (a multiple of "
                            f"512, at least 512); {len(bad)} of {len(req)} sizes wrong")
    return Verdict.ok()


def verdict_pools(case, obs, ctx):
    from minigrad.memory.allocator import pool_of, segment_size
    sizes = case["rounded"].tolist()
    pools, segs = np.asarray(obs.get("pool")), np.asarray(obs.get("segment"))
    if pools.shape != (len(sizes),) or segs.shape != (len(sizes),):
        return Verdict.fail("pool_of / segment_size: expected one value per size")
    for i, s in enumerate(sizes):
        if str(pools[i]) != pool_of(s):
            return Verdict.fail(f"pool_of({s}) returned {str(pools[i])!r}, expected {pool_of(s)!r} (the small "
                                f"pool serves blocks up to 1 MiB = {MiB} B)")
    for i, s in enumerate(sizes):
        if int(segs[i]) != segment_size(s):
            return Verdict.fail(f"segment_size({s}) returned {int(segs[i])}, expected {segment_size(s)} "
                                f"(2 MiB for the small pool, 20 MiB below 10 MiB, else the size rounded up "
                                f"to a multiple of 2 MiB)")
    return Verdict.ok()


def verdict_bump(case, obs, ctx):
    """A bump allocator's layout follows from its rules: check them block by block."""
    from minigrad.memory.allocator import pool_of, round_size, segment_size
    log, err = _load(obs, case)
    if err:
        return err
    current, top = {}, {}
    for i, (op, ident, nbytes) in enumerate(log.ops.tolist()):
        if op != MALLOC:
            if log.reserved_in_op[i] or log.released_in_op[i]:
                return Verdict.fail("a free made the bump allocator ask for or release a segment; its free "
                                    "does nothing")
            continue
        size, pool = round_size(nbytes), pool_of(round_size(nbytes))
        idx, off, got = log.where[ident]
        new = log.reserved_in_op[i]
        fits = pool in current and top[pool] + size <= log.seg_size[current[pool]]
        if got != size:
            return Verdict.fail(f"{log.malloc_words(ident)}: your block has {got} B, expected round_size = {size}")
        if fits and new:
            return Verdict.fail(f"{log.malloc_words(ident)} asked the device for a segment, but the current "
                                f"{pool} segment still had room at offset {top[pool]}")
        if not fits:
            if len(new) != 1:
                return Verdict.fail(f"{log.malloc_words(ident)} needs a new segment (the current {pool} one "
                                    f"is full or there is none) and should ask the device for exactly one; "
                                    f"it asked for {len(new)}")
            if log.seg_size[new[0]] != segment_size(size):
                return Verdict.fail(f"{log.malloc_words(ident)} asked the device for "
                                    f"{V.mib(log.seg_size[new[0]])}, expected segment_size = "
                                    f"{V.mib(segment_size(size))}")
            current[pool], top[pool] = new[0], 0
        if (idx, off) != (current[pool], top[pool]):
            return Verdict.fail(f"{log.malloc_words(ident)} got {log.place(ident)}; a bump allocator puts it "
                                f"at offset {top[pool]} of segment {current[pool]} (right after the previous "
                                f"{pool}-pool block)")
        top[pool] += size
    return Verdict.ok()


def _compare_malloc(log, ref, i, what, reuse_hint):
    """Does the malloc at op i give the reference's block (segment, offset, size) with the same
    segment requests? A failing Verdict says how it differs."""
    op, ident, nbytes = (int(x) for x in log.ops[i])
    if op != MALLOC or ref.status[i] != OK or log.status[i] != OK:
        return Verdict.ok()
    mine, theirs = log.where.get(ident), ref.where.get(ident)
    got_segs = [log.seg_size[j] for j in log.reserved_in_op[i]]
    want_segs = [ref.seg_size[j] for j in ref.reserved_in_op[i]]
    if mine == theirs and got_segs == want_segs:
        return Verdict.ok()
    head = f"{log.malloc_words(ident)} got {log.place(ident)}; expected {ref.place(ident)}"
    if got_segs and not want_segs:
        return Verdict.fail(f"{head}: you asked the device for a new segment although a cached free block "
                            f"could serve it ({reuse_hint})")
    if want_segs and not got_segs:
        return Verdict.fail(f"{head}: no cached free block is large enough here, so this malloc needs a new "
                            f"segment of segment_size = {V.mib(want_segs[0])}")
    if got_segs != want_segs:
        return Verdict.fail(f"{head}: you asked the device for {', '.join(V.mib(n) for n in got_segs)}, "
                            f"expected one segment of segment_size = {V.mib(want_segs[0])}")
    if mine and theirs and mine[:2] == theirs[:2]:
        rem = theirs[2] - _rounded(nbytes)
        return Verdict.fail(f"{head}: the block has the wrong size. Split only when the remainder is worth "
                            f"keeping (should_split: >= 512 B in the small pool, > 1 MiB in the large pool); "
                            f"here {'the remainder is ' + _nbytes(rem) if rem else 'there is no remainder'}")
    return Verdict.fail(f"{head}: {what}")


def _compare_layout(log, ref, what, reuse_hint):
    """The first malloc whose block differs from the reference's."""
    for i in range(len(log.ops)):
        v = _compare_malloc(log, ref, i, what, reuse_hint)
        if not v.passed:
            return v
    return Verdict.ok()


def _layout_verdict(case, obs, *, coalesce, what, reuse_hint):
    log, err = _load(obs, case)
    if err:
        return err
    ref = _Log(_ref_for(case, coalesce=coalesce), case["ops"])
    v = _compare_layout(log, ref, what, reuse_hint)
    if not v.passed and not coalesce:           # coalescing early is not a mistake in part 2
        ref2 = _Log(_ref_for(case, coalesce=True), case["ops"])
        if _compare_layout(log, ref2, what, reuse_hint).passed:
            return Verdict.ok()
    return v


def verdict_best_fit(case, obs, ctx):
    return _layout_verdict(case, obs, coalesce=False, reuse_hint="_take_best_fit",
                           what="best fit (_take_best_fit) takes the smallest cached free block that is large "
                                "enough (ties: the oldest segment, then the lowest offset), and the block "
                                "starts at that free block's offset")


def verdict_coalescing(case, obs, ctx):
    return _layout_verdict(case, obs, coalesce=True,
                           reuse_hint="after those frees, neighbouring free blocks should have merged into "
                                      "one block large enough: _coalesce",
                           what="after a free, the block must merge with free neighbours on both sides "
                                "(_coalesce), and best fit then finds the merged block")


def _budget_verdict(case, log, ref, ctx, title):
    """Peak reserved and average unused bytes within 1.25x the reference's, with a timeline plot."""
    peak_budget = BUDGET * ref.peak
    unused_budget = BUDGET * ref.unused
    plot = ctx.timeline(case.describe(), {"live requested bytes": log.live_requested,
                                          "reserved (reference)": ref.reserved, "reserved (yours)": log.reserved},
                        budget=peak_budget, title=title)
    v = V.check_budget("peak reserved", log.peak, peak_budget, reference=ref.peak, plot=plot)
    unused = (f"unused {log.unused_share:.0%}: on average {V.mib(log.unused)} of reserved memory held no "
              f"requested byte")
    ok = log.unused <= unused_budget + 1e-9
    w = Verdict(ok, (f"{unused}, within the budget of {V.mib(unused_budget)}" if ok else
                     f"{unused}, over the budget of {V.mib(unused_budget)} ({log.unused / max(unused_budget, 1):.2f}x "
                     f"the budget; the reference: {V.mib(ref.unused)}, unused {ref.unused_share:.0%})"))
    w = Verdict(w.passed, f"{w.message}; fragmentation at peak reservation {log.fragmentation:.0%} (1 - largest "
                          f"free block / free bytes; the reference: {ref.fragmentation:.0%})")
    both = Verdict(v.passed and w.passed, f"{v.message}; {w.message}", v.artifacts + w.artifacts)   # both said
    if not both.passed:
        both = Verdict(False, both.message + _reuse_hint(log), both.artifacts)
    return both


def verdict_random(case, obs, ctx):
    """Random mallocs and frees: a valid log; with empty_cache at the end, nothing stays reserved;
    peak reserved within 1.25x of the reference's."""
    log, err = _load(obs, case)
    if err:
        return err
    coalesce = case.params["cls"] != "BestFitAllocator"
    if coalesce and case.params.get("finish", True) and len(log.ops) and log.ops[-1][0] == EMPTY \
            and log.reserved[-1]:
        left = log.reserved[-1]
        return Verdict.fail(f"after every block was freed, empty_cache() left {V.mib(left)} reserved: freed "
                            f"blocks must coalesce back into one block per segment (Segment.is_free()), and "
                            f"empty_cache() must release every such segment")
    ref = _Log(_ref_for(case, coalesce=coalesce), case["ops"])
    budget = BUDGET * ref.peak
    v = V.check_budget("peak reserved", log.peak, budget, reference=ref.peak)
    if not v.passed:
        v = Verdict(False, v.message + (_reuse_hint(log, coalesce) or f". {REUSE_ADVICE[coalesce]}"))
    return v


def verdict_empty_cache(case, obs, ctx):
    """empty_cache() releases exactly the segments that hold no live block, returns their bytes, and only
    empty_cache() releases anything."""
    log, err = _load(obs, case)
    if err:
        return err
    ref = _Log(_ref_for(case, coalesce=True), case["ops"])
    k = 0
    for i, (op, _, _) in enumerate(log.ops.tolist()):
        if op == MALLOC:
            v = _compare_malloc(log, ref, i, "(your blocks differ from the reference's here)", "_coalesce")
            if not v.passed:
                return v
        if op != EMPTY:
            if log.released_in_op[i]:
                return Verdict.fail(f"operation {i} ({'malloc' if op == MALLOC else 'free'}) released a segment: "
                                    f"only empty_cache() (or the out-of-memory path) gives memory back")
            continue
        k += 1
        mine, theirs = sorted(log.released_in_op[i]), sorted(ref.released_in_op[i])
        freed = sum(log.seg_size[j] for j in mine)
        missing = [j for j in theirs if j not in mine]
        if missing:
            return Verdict.fail(f"empty_cache() call {k} did not release segment {missing[0]} "
                                f"({V.mib(log.seg_size[missing[0]])}), which held no live block: after "
                                f"coalescing it is one free block (Segment.is_free()); release it with "
                                f"self._remove_segment(seg) and self.source.release(seg.handle)")
        extra = [j for j in mine if j not in theirs]
        if extra:
            return Verdict.fail(f"empty_cache() call {k} released segment {extra[0]}, which it should have kept")
        if int(log.ret[i]) != freed:
            return Verdict.fail(f"empty_cache() call {k} released {_nbytes(freed)} but returned "
                                f"{int(log.ret[i]):,}: return the number of bytes released")
    return Verdict.ok()


def verdict_training(case, obs, ctx):
    """Budgets on the trace of a real training run."""
    log, err = _load(obs, case)
    if err:
        return err
    ref = _Log(_ref_for(case, coalesce=True), case["ops"])
    return _budget_verdict(case, log, ref, ctx, f"{case.describe()}: reserved bytes per operation")


def _oom_words(log, i, capacity):
    """Why the malloc at op i need not have failed, from the log up to there."""
    from minigrad.memory.allocator import segment_size
    need = _rounded(int(log.ops[i][2]))
    segs, blocks = log.state_before(i)
    hit = _free_range(segs, blocks, _pool(need), need)
    if hit is not None:
        return (f"segment {log.seg_index.get(hit[0], -1)} had {V.mib(hit[2])} free from offset {_nbytes(hit[1])} on "
                f"(free neighbours merged): coalescing and best fit would have served it")
    idle = sum(ss for sa, ss in segs.values() if not any(sa <= a < sa + ss for a, _ in blocks.values()))
    reserved = sum(ss for _, ss in segs.values())
    if idle and capacity is not None and reserved - idle + segment_size(need) <= capacity:
        return (f"{V.mib(idle)} of cached segments held no live block: release them (self._empty_cache()) "
                f"and try once more before raising")
    return "the reference allocator serves it"


def _oom_check(case, obs):
    """(verdict, log, reference log) for a run on a device of limited capacity or a memory limit."""
    p = case.params
    cap = p.get("capacity") if p.get("capacity") is not None else p.get("limit")
    log, err = _load(obs, case, capacity=cap)
    if err:
        if log is not None and p.get("limit") is not None and "allowed" in err.message:
            err = Verdict(False, err.message + f" (memory_limit = {V.mib(p['limit'])}: _new_segment must "
                                               f"refuse a segment that would take reserved bytes past it)")
        return err, log, None
    ref = _Log(_ref_for(case, coalesce=p["cls"] != "BestFitAllocator", capacity=p.get("capacity"),
                        limit=p.get("limit")), case["ops"])
    for i, (op, ident, nbytes) in enumerate(log.ops.tolist()):
        mine, theirs = int(log.status[i]), int(ref.status[i])
        if op != MALLOC or mine == OK:           # served, within the capacity (checked above): fine
            continue
        words = log.malloc_words(ident)
        if mine == BAD_RETURN:
            return Verdict.fail(f"{words} returned None: raise mg.OutOfMemoryError when the device is full"), \
                log, ref
        if mine == OTHER_OOM:
            return Verdict.fail(f"{words} raised {log.errors[i]}; raise minigrad's mg.OutOfMemoryError "
                                f"instead"), log, ref
        if theirs == OK and p["cls"] == "BestFitAllocator":
            return Verdict.fail(f"{words} raised OutOfMemoryError, but a best-fit allocator serves it within "
                                f"{V.mib(cap)}: reuse a cached free block first, and refuse a new segment only "
                                f"when reserved_bytes() + its size would pass memory_limit"), log, ref
        if theirs == OK:
            return Verdict.fail(f"{words} raised OutOfMemoryError, but {_oom_words(log, i, cap)}"), log, ref
    n_oom = int((log.status == OOM).sum())
    return Verdict.ok(f"{n_oom} OutOfMemoryError{'s' if n_oom != 1 else ''} where expected" if n_oom else ""), \
        log, ref


def verdict_oom(case, obs, ctx):
    """Out-of-memory behaviour: only mallocs the reference cannot serve either fail, with
    mg.OutOfMemoryError; the allocator keeps working afterwards; the capacity (or memory limit) holds."""
    return _oom_check(case, obs)[0]


def verdict_card(case, obs, ctx):
    """A training run that fits the card only with caching and coalescing: no OutOfMemoryError."""
    v, log, ref = _oom_check(case, obs)
    if not v.passed:
        return v
    cap = case.params["capacity"]
    plot = ctx.timeline(case.describe(), {"live requested bytes": log.live_requested,
                                          "reserved (reference)": ref.reserved, "reserved (yours)": log.reserved},
                        budget=cap, title=f"{case.describe()}: reserved bytes per operation")
    return Verdict(True, f"fits: peak reserved {V.mib(log.peak)} of the {V.mib(cap)} card (the reference "
                         f"needs {V.mib(ref.peak)})", [plot] if plot else [])


def verdict_minigrad(case, obs, ctx):
    p = case.params
    key = repr(sorted(p.items()))
    _MINIGRAD_INPUTS[key] = (p, case["x"], case["y"])
    ref_losses, ref_peak = _minigrad_reference(key)
    events = np.asarray(obs.get("events"))
    rep = V.replay(events, alignment=ALIGN, max_violations=3)
    if not rep.ok:
        return Verdict.fail(f"while minigrad trained with your allocator: {rep.violations[0]} (block ids count "
                            f"minigrad's mallocs from 0)")
    requests = np.asarray(obs.get("requests"))
    for kind, ident, addr, size in events.tolist():
        if kind == V.ALLOC and 0 <= ident < len(requests) and size < requests[ident]:
            return Verdict.fail(f"minigrad's malloc #{ident} asked for {requests[ident]} B and got a block of "
                                f"{size} B")
    v = V.compare("training losses with your allocator", obs.get("losses"), ref_losses, rtol=1e-4, atol=1e-5,
                  what="loss")
    if not v.passed:
        return Verdict.fail(v.message + " (tensors whose memory overlaps overwrite each other)")
    if int(np.asarray(obs.get("still_live"))):
        return Verdict.fail(f"{int(np.asarray(obs.get('still_live')))} blocks were still allocated after "
                            f"the model and every tensor were deleted: does free() give blocks back?")
    budget = BUDGET * ref_peak
    reserved = rep.reserved
    plot = ctx.timeline(case.describe(), {"reserved": reserved, "allocated": rep.allocated},
                        budget=budget, title="minigrad training with your allocator")
    return V.check_budget("peak reserved while training", rep.peak_reserved, budget, reference=ref_peak,
                          plot=plot)
