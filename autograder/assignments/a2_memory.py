"""a2_memory: the caching memory pool, graded against memory budgets.

The student writes, in ``solutions/a2_memory.ipynb`` (cells by id):

  part1  a2-base (given), a2-sizes, a2-bump   round_size / pool_of / segment_size, and BumpAllocator
  part2  a2-bestfit                            should_split and BestFitAllocator (best fit + splitting)
  part3  a2-coalesce                           CoalescingAllocator (coalescing on free, empty_cache)
  part4  a2-oom                                StudentAllocator (OOM: drop the cache, retry, raise);
                                               it replaces minigrad's pool to train a model

How it is graded. Every workload is a list of operations (``ops``, int64 rows ``[op, id, nbytes]``: malloc
``id`` of ``nbytes``, free ``id``, or empty_cache) built here in the parent: crafted scenarios, random
sequences, and the allocation trace of a real minigrad training run, recorded with
``minigrad.memory.record_memory_history`` on minigrad's own pool (deterministic: the garbage collector is
off while recording). The sandboxed child runs the ops through the student's allocator on a
``TraceSource``: a device the grader owns, which logs every segment the allocator obtains or releases.
The child returns only that log plus the address and size of every block ``malloc`` returned; nothing
the student's allocator says about itself (its statistics) is read. The parent replays the log
(``verdicts.replay``: no overlapping live blocks, 512-byte alignment, blocks inside reserved segments,
sizes >= requests, capacity) and measures peak reserved bytes and fragmentation itself. Expected layouts
and budgets come from running minigrad's own allocator, in the parent, on the same ops.

Fragmentation here is the time-averaged share of reserved memory that holds no requested byte:
``1 - sum(live requested bytes) / sum(reserved bytes)`` over the ops. Budgets: 1.25x the reference's
peak reserved bytes and 1.25x its average unused reserved bytes.

The spec is imported in the child too: numpy and the autograder package at the top, minigrad only
inside functions.
"""
import functools
import re

import numpy as np

from autograder import verdicts as V
from autograder.spec import Assignment, Case, Part, Test, Verdict

KiB, MiB = 1024, 1024 ** 2
MALLOC, FREE, EMPTY = 0, 1, 2
ALIGN = 512
BUDGET = 1.25                 # x the reference's peak reserved bytes and average unused bytes
CARD = 64 * MiB               # an "8 GB card" scaled down 128x

# status of each op, as the child reports it
OK, OOM, OTHER_OOM, BAD_RETURN = 0, 1, 2, 3


# ---- the device the allocator under test gets (child and parent) ----------------------------------------
class _Handle:
    """What a simulated segment's release needs (opaque to the allocator)."""
    __slots__ = ("sid",)

    def __init__(self, sid):
        self.sid = sid

    def __repr__(self):
        return f"<segment handle {self.sid}>"


class TraceSource:
    """A segment source that logs what it hands out: ``[RESERVE, id, address, size]`` and
    ``[RELEASE, id, 0, 0]`` rows in ``log`` (the driver adds the ALLOC/FREE rows to the same list).

    Simulated (addresses only, 512-aligned, never adjacent) or ``real`` (NumPy arenas, aligned to 512
    bytes, for tensors). Refuses once ``capacity`` bytes are out, like a full device."""

    def __init__(self, capacity=None, real=False, base=1 << 32):
        self.capacity = capacity
        self.real = real
        self.in_use = 0
        self.next_address = base
        self.log = []
        self.refused = 0
        self._live = {}                 # id(handle) -> (segment id, size, handle)
        self._n = 0

    def allocate(self, nbytes):
        nbytes = int(nbytes)
        if nbytes <= 0:
            raise ValueError(f"source.allocate({nbytes}): a segment needs a positive size")
        if self.capacity is not None and self.in_use + nbytes > self.capacity:
            self.refused += 1
            return None
        sid = self._n
        self._n += 1
        if self.real:
            arena = np.empty(nbytes + ALIGN, dtype=np.uint8)
            start = arena.__array_interface__["data"][0]
            off = (-start) % ALIGN
            handle = arena[off:off + nbytes]        # a view: keeps the arena alive while it is used
            address = start + off
        else:
            address = self.next_address
            self.next_address += -(-(nbytes + 65536) // 65536) * 65536
            handle = _Handle(sid)
        self.in_use += nbytes
        self._live[id(handle)] = (sid, nbytes, handle)
        self.log.append([V.RESERVE, sid, address, nbytes])
        return address, handle

    def release(self, handle):
        entry = self._live.pop(id(handle), None)
        if entry is None or entry[2] is not handle:
            self.log.append([V.RELEASE, -1, 0, 0])  # replay: "releases a segment that is not reserved"
            return
        sid, nbytes, _ = entry
        self.in_use -= nbytes
        self.log.append([V.RELEASE, sid, 0, 0])


def _block_fields(block, i):
    try:
        return int(block.address), int(block.size)
    except Exception as e:
        raise TypeError(f"malloc #{i} returned {block!r}, which has no integer .address and .size "
                        f"(it must return the Block it hands out)") from e


def _drive(alloc, source, ops, catch_oom=False):
    """Run ``ops`` through ``alloc``; returns the observation arrays. A free is logged before the
    allocator sees it, an alloc after malloc returned (its segment requests come first)."""
    import minigrad as mg
    log = source.log
    blocks = {}
    n = len(ops)
    marks = np.zeros(n, np.int64)           # len(log) after each op
    status = np.zeros(n, np.int64)
    ret = np.zeros(n, np.int64)             # what empty_cache() returned
    errors = [""] * n
    for i, (op, ident, nbytes) in enumerate(np.asarray(ops).tolist()):
        if op == MALLOC:
            try:
                block = alloc.malloc(nbytes)
            except (mg.OutOfMemoryError, MemoryError) as e:
                if not catch_oom:
                    raise
                status[i] = OOM if isinstance(e, mg.OutOfMemoryError) else OTHER_OOM
                errors[i] = f"{type(e).__name__}: {str(e)[:300]}"
            else:
                if block is None:
                    if not catch_oom:
                        raise TypeError(f"malloc #{ident} returned None (raise mg.OutOfMemoryError when "
                                        f"there is no memory; return the Block otherwise)")
                    status[i] = BAD_RETURN
                    errors[i] = "returned None"
                else:
                    address, size = _block_fields(block, ident)
                    log.append([V.ALLOC, ident, address, size])
                    blocks[ident] = block
        elif op == FREE:
            if ident in blocks:              # blocks whose malloc failed are not freed
                log.append([V.FREE, ident, 0, 0])
                alloc.free(blocks.pop(ident))
        elif op == EMPTY:
            ret[i] = int(alloc.empty_cache() or 0)
        marks[i] = len(log)
    events = np.array(log, dtype=np.int64).reshape(-1, 4)
    return {"events": events, "marks": marks, "status": status, "ret": ret,
            "errors": np.array(errors, dtype=str)}


# ---- observations (child) ---------------------------------------------------------------------------------
def observe_sizes(ns, case):
    req = [int(x) for x in case["requests"]]
    rounded = [int(x) for x in case["rounded"]]
    return {"round": np.array([ns.round_size(x) for x in req], dtype=np.int64),
            "pool": np.array([str(ns.pool_of(x)) for x in rounded], dtype=str),
            "segment": np.array([ns.segment_size(x) for x in rounded], dtype=np.int64)}


def observe_ops(ns, case):
    """Run the case's ops through the class it names, on a (possibly limited) TraceSource."""
    p = case.params
    source = TraceSource(capacity=p.get("capacity"))
    alloc = getattr(ns, p["cls"])(source, "grader")
    if p.get("limit") is not None:
        alloc.memory_limit = int(p["limit"])
    return _drive(alloc, source, case["ops"], catch_oom=bool(p.get("catch_oom")))


def observe_minigrad(ns, case):
    """StudentAllocator as minigrad's cpu pool (real memory) while a small model trains."""
    import gc
    import minigrad.memory as mem
    p = case.params
    source = TraceSource(real=True)
    alloc = ns.StudentAllocator(source, "cpu")
    log, requests, live = source.log, [], {}
    cls = type(alloc)

    def malloc(nbytes, cause=None):
        block = cls.malloc(alloc, nbytes, cause)
        k = len(requests)
        address, size = _block_fields(block, k)
        requests.append(int(nbytes))
        live[id(block)] = (k, block)
        log.append([V.ALLOC, k, address, size])
        return block

    def free(block):
        entry = live.pop(id(block), None)
        if entry is not None:           # (a free deferred by AllocatorBase comes back here: logged once)
            log.append([V.FREE, entry[0], 0, 0])
        cls.free(alloc, block)

    alloc.malloc, alloc.free = malloc, free     # instance attributes: what minigrad's storage calls
    was = gc.isenabled()
    gc.disable()
    try:
        with mem.enabled("cpu", allocator=alloc):
            losses = _train(p, case["x"], case["y"])
            gc.collect()
            still_live = len(live)
    finally:
        if was:
            gc.enable()
    return {"losses": losses, "events": np.array(log, dtype=np.int64).reshape(-1, 4),
            "requests": np.array(requests, dtype=np.int64), "still_live": np.int64(still_live)}


def _train(p, x, y):
    """A few Adam steps of a small MLP on (x, y) batches; returns the losses (child and parent)."""
    import minigrad as mg
    from minigrad import nn
    from minigrad.nn import functional as F
    mg.manual_seed(p["seed"])
    widths = p["widths"]
    layers = []
    for a, b in zip(widths[:-1], widths[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    model = nn.Sequential(*layers[:-1])
    opt = mg.optim.Adam(model.parameters(), lr=1e-3)
    losses, start = [], 0
    for b in p["batches"]:
        xb, yb = mg.tensor(x[start:start + b]), mg.tensor(y[start:start + b])
        start += b
        loss = F.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        del xb, yb, loss
    del model, opt, layers
    return np.array(losses, dtype=np.float64)


# ---- workloads (parent) -------------------------------------------------------------------------------------
def _ops(rows):
    return np.array(rows, dtype=np.int64).reshape(-1, 3)


class _Ops:
    """Builds ops with sequential block ids (malloc #k is block id k)."""

    def __init__(self):
        self.rows, self.n = [], 0

    def m(self, nbytes):
        self.rows.append([MALLOC, self.n, int(nbytes)])
        self.n += 1
        return self.n - 1

    def f(self, *ids):
        for i in ids:
            self.rows.append([FREE, i, 0])

    def empty(self):
        self.rows.append([EMPTY, -1, 0])

    def array(self):
        return _ops(self.rows)


def _scenario(name):
    o = _Ops()
    if name == "best fit, small pool":
        a, _, b, _, c, _ = o.m(8 * KiB), o.m(512), o.m(2 * KiB), o.m(512), o.m(4 * KiB), o.m(512)
        o.f(a, b, c)                        # three holes of 8, 2 and 4 KiB, kept apart by live blocks
        o.m(3 * KiB)                        # -> the 4 KiB hole (split: 1 KiB left)
        o.m(2 * KiB)                        # -> the 2 KiB hole
        o.m(1000)                           # -> the 1 KiB left of the 4 KiB hole
        o.m(6 * KiB)                        # -> the 8 KiB hole
        o.m(20 * KiB)                       # -> the rest of the segment
        o.m(MiB)                            # -> the rest of the segment
        o.m(MiB)                            # -> no room left: a new segment
    elif name == "best fit, large pool":
        a, _, b, _, c, _ = o.m(3 * MiB), o.m(1536 * KiB), o.m(6 * MiB), o.m(2 * MiB), o.m(4 * MiB), o.m(MiB + 1)
        o.f(a, b, c)
        o.m(3584 * KiB)                     # -> the 4 MiB hole (0.5 MiB left: not split)
        o.m(2560 * KiB)                     # -> the 3 MiB hole (not split)
        o.m(4 * MiB)                        # -> the 6 MiB hole (split: 2 MiB left)
        o.m(12 * MiB)                       # >= 10 MiB: a segment of its own
        o.m(9 * MiB)                        # no room left: a new 20 MiB segment
        o.m(1536 * KiB)                     # -> the 2 MiB left of the 6 MiB hole
    elif name == "splitting":
        o.m(1000)                           # 1024 B at the start of a 2 MiB segment...
        o.m(1000)                           # ...and the next one right after it
        a = o.m(3 * MiB)
        o.m(5 * MiB)
        o.m(9728 * KiB)                     # 9.5 MiB out of the 12 MiB left: split (2.5 MiB left)
        o.m(2 * MiB)                        # -> the 2.5 MiB left: remainder 0.5 MiB, not split
        o.f(a)
        o.m(2200 * KiB)                     # -> the 3 MiB hole: remainder 0.85 MiB, not split
        o.m(600 * KiB)                      # small pool again: split from the 2 MiB segment
        o.m(4 * MiB - 512)                  # a fresh 20 MiB segment, split
    elif name == "memory limit":
        o.m(MiB)                            # a 2 MiB small segment
        o.m(5 * MiB)                        # a 20 MiB large segment: 22 MiB reserved
        o.m(16 * MiB)                       # 16 MiB more would pass 30 MiB -> OutOfMemoryError
        o.m(6 * MiB)                        # from the cache
        e = o.m(9 * MiB)                    # the rest of the large segment
        o.m(600 * KiB)                      # the rest of the small segment
        o.m(1536 * KiB)                     # a new 20 MiB segment would pass 30 MiB -> OutOfMemoryError
        o.f(e)
        o.m(8 * MiB)                        # from the cache again
    elif name == "coalescing, small pool":
        a, b, c, d = o.m(100 * KiB), o.m(100 * KiB), o.m(100 * KiB), o.m(100 * KiB)
        e, e2 = o.m(1000 * KiB), o.m(600 * KiB)     # the 2 MiB segment is full but for 48 KiB
        o.f(a, c, b)                        # b merges with both neighbours: 300 KiB at offset 0
        f = o.m(300 * KiB)                  # -> offset 0, no new segment
        o.f(d, f)                           # f merges with d: 400 KiB at offset 0
        g = o.m(350 * KiB)                  # -> offset 0
        o.f(e2, e, g)                       # the whole segment is one free block again
        o.m(MiB)                            # -> offset 0...
        o.m(1000 * KiB)                     # ...and right after it: both fit only in a merged segment
    elif name == "coalescing, large pool":
        a, b, c = o.m(6 * MiB), o.m(6 * MiB), o.m(6 * MiB)
        o.f(b, a)                           # a absorbs b: one 12 MiB block at offset 0
        o.m(9 * MiB)                        # -> offset 0 of the same segment (3 MiB split off)
        o.f(c)                              # c merges with the 3 MiB before it and the 2 MiB tail: 11 MiB
        o.m(11 * MiB - 512)                 # -> that 11 MiB block
        o.m(8 * MiB)                        # -> a new segment
    elif name == "empty_cache":
        s1, s2 = o.m(300 * KiB), o.m(300 * KiB)        # small segment 0
        l1, l2 = o.m(5 * MiB), o.m(5 * MiB)            # large segment 1
        big = o.m(14 * MiB)                            # large segment 2, its own
        o.f(s2, l1, big)
        o.empty()                           # only segment 2 is entirely free
        o.f(s1)
        o.empty()                           # segment 0 coalesced back into one block: released
        t = o.m(100 * KiB)                  # a new small segment 3
        o.f(l2)
        o.empty()                           # segment 1 goes; segment 3 stays
        o.f(t)
        o.empty()                           # nothing is left
    elif name == "retry":
        a = o.m(4 * KiB)                    # a 2 MiB small segment...
        o.f(a)                              # ...cached, entirely free
        b = o.m(19 * MiB)                   # needs 20 MiB: fits only once the small segment is released
        o.f(b)
        o.m(64 * KiB)                       # needs 2 MiB: the cached 20 MiB segment must go
    elif name == "retry, twice":
        a, c = o.m(512 * KiB), o.m(2 * MiB)  # a small (2 MiB) and a large (20 MiB) segment
        o.f(a, c)
        o.m(21 * MiB)                       # a 22 MiB segment: both cached segments must go first
        o.m(900 * KiB)                      # a small segment again (fits beside it)
    elif name == "out of memory":
        a = o.m(MiB)                        # a 2 MiB small segment
        b, c = o.m(5 * MiB), o.m(5 * MiB)   # a 20 MiB large segment: 22 MiB reserved
        o.m(22 * MiB)                       # 22 MiB more: nothing cached is free -> OutOfMemoryError
        o.f(b, c)
        o.m(22 * MiB)                       # now the free 20 MiB segment can go: fits
        o.m(30 * MiB)                       # never fits -> OutOfMemoryError
        o.f(a)
        o.m(256 * KiB)                      # the allocator still works after raising
        o.m(12 * MiB)                       # exactly fills the device
    else:
        raise KeyError(f"unknown scenario {name!r}")
    return o.array()


def _random_ops(seed, n, large=0.25, huge=0.03, free_p=0.45, finish=True, empty_every=0):
    """Random mallocs (log-uniform sizes; some large, a few >= 10 MiB) and frees of random live blocks;
    with ``finish``, everything is freed at the end and empty_cache() called; with ``empty_every``,
    empty_cache() is called every that many operations too."""
    rng = np.random.default_rng(seed)
    o, live = _Ops(), []
    for step in range(n):
        if empty_every and step % empty_every == empty_every - 1:
            o.empty()
        if live and rng.random() < free_p:
            o.f(live.pop(int(rng.integers(len(live)))))
            continue
        r = rng.random()
        if r < huge:
            size = int(rng.integers(10 * MiB, 30 * MiB))
        elif r < huge + large:
            size = int(np.exp(rng.uniform(np.log(MiB + 1), np.log(10 * MiB))))
        else:
            size = int(np.exp(rng.uniform(0, np.log(MiB))))
        live.append(o.m(size))
    if finish:
        rng.shuffle(live)
        o.f(*[int(i) for i in live])
        o.empty()
    return o.array()


def _holes_ops(seed, n=24):
    """Holes kept apart by live blocks, then requests that best fit must place exactly."""
    rng = np.random.default_rng(seed)
    o, holes = _Ops(), []
    for _ in range(n):
        holes.append(o.m(int(rng.integers(1, 64)) * 1000))
        o.m(int(rng.integers(1, 8)) * 512)          # a live separator
    o.f(*holes)
    for _ in range(n):
        o.m(int(rng.integers(1, 64)) * 1000)
    return o.array()


def _merge_ops(seed, rounds=8):
    """Runs of neighbouring blocks freed in random order, then a request that fits only in the merged run."""
    rng = np.random.default_rng(seed)
    o = _Ops()
    for _ in range(rounds):
        large = rng.random() < 0.4
        unit = 256 * KiB if large else 8 * KiB
        run = [o.m(int(rng.integers(1, 16)) * unit + int(rng.integers(0, 512))) for _ in range(int(rng.integers(3, 7)))]
        o.m(int(rng.integers(1, 4)) * 512)          # a live block after the run
        o.f(*[run[int(i)] for i in rng.permutation(len(run))])
        total = sum(_rounded(int(o.rows[k][2])) for k in range(len(o.rows)) if o.rows[k][0] == MALLOC
                    and o.rows[k][1] in run)
        o.m(max(512, total - int(rng.integers(0, 3)) * 512))
    return o.array()


@functools.lru_cache(maxsize=16)
def _training_ops(kind, widths, batches, seed):
    """The allocation trace of a real training run with minigrad's own pool (cached per process)."""
    import contextlib
    import gc
    import minigrad as mg
    import minigrad.memory as mem
    from minigrad import nn
    from minigrad.memory import CachingAllocator, CPUSource
    from minigrad.nn import functional as F
    try:
        from threadpoolctl import threadpool_limits
        limit_threads = threadpool_limits(1)            # BLAS threads only slow small matmuls down
    except Exception:
        limit_threads = contextlib.nullcontext()
    mg.manual_seed(seed)
    rng = np.random.default_rng(seed)
    alloc = CachingAllocator(CPUSource(), "trace")
    was = gc.isenabled()
    gc.disable()                                        # frees happen exactly where the program drops them
    try:
        with limit_threads, mem.enabled("cpu", allocator=alloc):
            mem.record_memory_history(True)
            if kind == "mlp":
                layers = []
                for a, b in zip(widths[:-1], widths[1:]):
                    layers += [nn.Linear(a, b), nn.ReLU()]
                model = nn.Sequential(*layers[:-1])
            else:
                c1, c2 = widths
                model = nn.Sequential(nn.Conv2d(1, c1, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(c1, c2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Flatten(), nn.Linear(c2 * 7 * 7, 10))
            opt = mg.optim.Adam(model.parameters(), lr=1e-3)
            for b in batches:
                shape = (b, widths[0]) if kind == "mlp" else (b, 1, 28, 28)
                x = mg.tensor(rng.standard_normal(shape).astype(np.float32))
                y = mg.tensor(rng.integers(0, 10, b))
                loss = F.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                del x, y, loss
            events = list(alloc.history.events)
            alloc.history = None
            del model, opt
    finally:
        if was:
            gc.enable()
    o, ids = _Ops(), {}
    for e in events:
        if e["action"] == "alloc":
            ids[e["address"]] = o.m(e["requested"])
        elif e["action"] == "free" and e["address"] in ids:
            o.f(ids.pop(e["address"]))
    o.f(*ids.values())                                  # the model and optimizer state go at the end
    return o.array()


def inputs_sizes(p):
    rng = np.random.default_rng(p["seed"])
    edges = [1, 100, 511, 512, 513, 1000, 1024, 4097, MiB - 1, MiB, MiB + 1, MiB + 512, 5 * MiB,
             10 * MiB - 512, 10 * MiB - 1, 10 * MiB, 10 * MiB + 1, 25 * MiB + 3, 64 * MiB]
    req = np.array(edges + [int(np.exp(rng.uniform(0, np.log(40 * MiB)))) for _ in range(p["n"])], np.int64)
    return {"requests": req, "rounded": np.maximum(512, -(-req // 512) * 512)}


def inputs_ops(p):
    w = p["workload"]
    if w == "scenario":
        ops = _scenario(p["name"])
    elif w == "random":
        ops = _random_ops(p["seed"], p["n"], finish=p.get("finish", True), empty_every=p.get("empty_every", 0))
    elif w == "merge":
        ops = _merge_ops(p["seed"])
    elif w == "holes":
        ops = _holes_ops(p["seed"])
    elif w == "training":
        ops = _training_ops(p["kind"], tuple(p["widths"]), tuple(p["batches"]), p.get("seed", 0))
    else:
        raise KeyError(w)
    return {"ops": ops}


def inputs_minigrad(p):
    rng = np.random.default_rng(p["seed"])
    n = sum(p["batches"])
    return {"x": rng.standard_normal((n, p["widths"][0])).astype(np.float32),
            "y": rng.integers(0, p["widths"][-1], n).astype(np.int64)}


# ---- the reference (parent, minigrad's own allocator) ---------------------------------------------------------
def _reference(ops, *, coalesce=True, capacity=None, limit=None):
    from minigrad.memory.allocator import CachingAllocator
    cls = CachingAllocator if coalesce else _no_coalescing_class()
    source = TraceSource(capacity=capacity)
    alloc = cls(source, "reference")
    alloc.memory_limit = limit
    return _drive(alloc, source, ops, catch_oom=True)


@functools.lru_cache(maxsize=1)
def _no_coalescing_class():
    from minigrad.memory.allocator import CachingAllocator

    class BestFitOnly(CachingAllocator):        # part 2's allocator: freed blocks are cached as they are,
        def _coalesce(self, block):             # and nothing is ever released (no empty_cache, no retry)
            return block

        def _empty_cache(self):
            return 0
    return BestFitOnly


def _cached_reference(key, ops, **kw):
    """The reference on one case's ops (cached: many submissions share a case)."""
    hit = _REF_CACHE.get(key)
    if hit is None or not np.array_equal(hit[0], ops):
        hit = _REF_CACHE[key] = (ops.copy(), _reference(ops, **kw))
    return hit[1]


_REF_CACHE = {}


def _ref_for(case, **kw):
    key = (repr(sorted(case.params.items())), repr(sorted(kw.items())))
    return _cached_reference(key, case["ops"], **kw)


# ---- reading a log (parent) ---------------------------------------------------------------------------------
def _nbytes(n):
    """Exact below 10 KiB or when not a whole number of KiB, else in KiB/MiB."""
    n = int(n)
    return f"{n:,} B" if n < 10 * KiB or n % KiB else V.mib(n)


def _rounded(n):
    return 512 if n < 512 else -(-n // 512) * 512


def _pool(size):
    return "small" if size <= MiB else "large"


def _seg_pool(seg_size):
    return "small" if seg_size == 2 * MiB else "large"


class _Log:
    """A checked log, with the facts the messages need: per malloc its segment (in order of reservation),
    offset and size; per op the reserved bytes after it and the segments reserved during it."""

    def __init__(self, obs, ops, capacity=None):
        self.ops = np.asarray(ops)
        self.events = np.asarray(obs.get("events"))
        self.marks = np.asarray(obs.get("marks"), dtype=np.int64)
        self.status = np.asarray(obs.get("status"), dtype=np.int64)
        self.ret = np.asarray(obs.get("ret"), dtype=np.int64)
        self.errors = [str(e) for e in np.asarray(obs.get("errors"))]
        n = len(self.ops)
        if self.marks.shape != (n,) or self.status.shape != (n,) or self.ret.shape != (n,) \
                or len(self.errors) != n:
            raise ValueError("the observation does not have one entry per operation")
        self.rep = V.replay(self.events, alignment=ALIGN, capacity=capacity, max_violations=3)
        self.requests = {int(i): int(b) for op, i, b in self.ops.tolist() if op == MALLOC}
        self.seg_index, self.seg_size, self.seg_addr = {}, [], []
        self.where = {}                     # block id -> (segment index, offset, size)
        self.reserved_in_op = [[] for _ in range(n)]
        self.released_in_op = [[] for _ in range(n)]
        live_segs = {}
        op_of_event = np.searchsorted(self.marks, np.arange(len(self.events)), side="right")
        for e, (kind, ident, addr, size) in enumerate(self.events.tolist()):
            i = int(op_of_event[e])
            if kind == V.RESERVE:
                idx = len(self.seg_size)
                self.seg_index[ident] = idx
                self.seg_size.append(size)
                self.seg_addr.append(addr)
                live_segs[ident] = (addr, size, idx)
                if i < n:
                    self.reserved_in_op[i].append(idx)
            elif kind == V.RELEASE:
                seg = live_segs.pop(ident, None)
                if seg is not None and i < n:
                    self.released_in_op[i].append(seg[2])
            elif kind == V.ALLOC:
                for sa, ss, idx in live_segs.values():
                    if sa <= addr < sa + ss:
                        self.where[ident] = (idx, addr - sa, size)
                        break
                else:
                    self.where[ident] = (-1, addr, size)
        self.reserved = np.array([self.rep.reserved[m - 1] if m > 0 else 0 for m in self.marks], np.int64)
        live_req = np.zeros(n, np.int64)
        cur, alive = 0, {}
        for i, (op, ident, nbytes) in enumerate(self.ops.tolist()):
            if op == MALLOC and self.status[i] == OK:
                alive[ident] = nbytes
                cur += nbytes
            elif op == FREE and ident in alive:
                cur -= alive.pop(ident)
            live_req[i] = cur
        self.live_requested = live_req

    # -- figures
    @property
    def peak(self):
        return self.rep.peak_reserved

    @property
    def unused(self):
        """Average bytes of reserved memory that held no requested byte, over the ops."""
        return float(np.mean(self.reserved - self.live_requested)) if len(self.ops) else 0.0

    @property
    def fragmentation(self):
        total = float(self.reserved.sum())
        return 0.0 if total == 0 else 1.0 - float(self.live_requested.sum()) / total

    # -- words
    def place(self, ident):
        idx, off, size = self.where.get(ident, (-1, 0, 0))
        if idx < 0:
            return f"a block of {V.mib(size)} outside every segment"
        return f"a block of {_nbytes(size)} at offset {_nbytes(off)} of segment {idx}"

    def malloc_words(self, ident):
        n = self.requests.get(ident, 0)
        return f"malloc #{ident} ({_nbytes(n)}: a {_pool(_rounded(n))}-pool block of {_nbytes(_rounded(n))})"

    def violation(self):
        """The first replay violation, in the student's terms (malloc numbers, segment offsets)."""
        text = self.rep.violations[0]
        m = re.match(r"event (\d+) \((\w+) id=(-?\d+) addr=(-?\d+) size=(-?\d+)\): (.*)", text)
        if not m:
            return text
        kind, ident, msg = m.group(2), int(m.group(3)), m.group(6)
        o = re.match(r"overlaps the live block \[(\d+), (\d+)\)", msg)
        if kind == "alloc" and o:
            other = self._block_at(int(o.group(1)), int(o.group(2)), before=ident)
            if other is not None:
                msg = f"it overlaps the live block of malloc #{other} ({self.place(other)})"
        msg = self._addresses(msg)
        if kind == "alloc":
            return f"{self.malloc_words(ident)} got {self.place(ident)}: {msg}"
        if kind == "free":
            return f"free of the block of malloc #{ident}: {msg}"
        if kind == "reserve":
            c = re.match(r"reserved (\d+) bytes, more than the device's (\d+)", msg)
            if c:
                msg = f"that makes {V.mib(int(c.group(1)))} reserved, more than the {V.mib(int(c.group(2)))} allowed"
            return f"segment request of {V.mib(int(m.group(5)))} from the device: {msg}"
        return f"segment release: {msg}"

    def _block_at(self, start, end, before):
        """The latest malloc before `before` whose block was [start, end)."""
        for ident in sorted((k for k in self.where if k < before), reverse=True):
            idx, off, size = self.where[ident]
            if idx >= 0 and self.seg_addr[idx] + off == start and size == end - start:
                return ident
        return None

    def _addresses(self, msg):
        def sub(mm):
            a = int(mm.group(0))
            for idx, (sa, ss) in enumerate(zip(self.seg_addr, self.seg_size)):
                if sa <= a <= sa + ss:
                    return f"offset {_nbytes(a - sa)} of segment {idx}"
            return mm.group(0)
        return re.sub(r"\d{7,}", sub, msg)

    def checks(self):
        """Structural checks: replay violations, then blocks smaller than requested."""
        if not self.rep.ok:
            more = len(self.rep.violations) - 1
            return Verdict.fail(self.violation() + (f" (and {more} more problem{'s' if more > 1 else ''})"
                                                    if more else ""))
        for ident, (idx, off, size) in sorted(self.where.items()):
            if size < self.requests.get(ident, 0):
                return Verdict.fail(f"{self.malloc_words(ident)} returned a block of only {_nbytes(size)}")
        return Verdict.ok()

    def state_before(self, i):
        """(live segments {id: (addr, size)}, live blocks {id: (addr, size)}) just before op i."""
        segs, blocks = {}, {}
        m = int(self.marks[i - 1]) if i > 0 else 0
        for kind, ident, addr, size in self.events[:m].tolist():
            _apply(segs, blocks, kind, ident, addr, size)
        return segs, blocks

    def missed_reuse(self):
        """The first malloc that asked the device for a segment although a free range of a segment of
        its pool (free neighbours counted together) could hold it: (malloc id, segment, offset, bytes)."""
        segs, blocks = {}, {}
        op_of_event = np.searchsorted(self.marks, np.arange(len(self.events)), side="right")
        for e, (kind, ident, addr, size) in enumerate(self.events.tolist()):
            i = int(op_of_event[e])
            if kind == V.RESERVE and i < len(self.ops) and self.ops[i][0] == MALLOC:
                need = _rounded(int(self.ops[i][2]))
                hit = _free_range(segs, blocks, _pool(need), need)
                if hit is not None:
                    sid, off, nbytes = hit
                    return int(self.ops[i][1]), self.seg_index.get(sid, -1), off, nbytes
            _apply(segs, blocks, kind, ident, addr, size)
        return None


def _apply(segs, blocks, kind, ident, addr, size):
    if kind == V.RESERVE:
        segs[ident] = (addr, size)
    elif kind == V.RELEASE:
        segs.pop(ident, None)
    elif kind == V.ALLOC:
        blocks[ident] = (addr, size)
    elif kind == V.FREE:
        blocks.pop(ident, None)


def _free_range(segs, blocks, pool, need):
    """(segment id, offset, bytes) of the first range of at least `need` bytes that holds no live block,
    in a segment of `pool`; None if there is none."""
    used = sorted(blocks.values())
    for sid, (sa, ss) in segs.items():
        if _seg_pool(ss) != pool:
            continue
        top = sa
        for a, s in [(a, s) for a, s in used if sa <= a < sa + ss] + [(sa + ss, 0)]:
            if a - top >= need:
                return sid, top - sa, a - top
            top = max(top, a + s)
    return None


def _load(obs, case, capacity=None):
    try:
        return _Log(obs, case["ops"], capacity), None
    except Exception as e:
        return None, Verdict.fail(f"the grader could not read your allocator's log ({type(e).__name__}: {e})")


REUSE_ADVICE = {
    False: "a freed block must go back to the free list (_free) and be found again by _take_best_fit",
    True: "a freed block must merge with its free neighbours (coalescing, _coalesce) and be found again by "
          "the best-fit search",
}


def _reuse_hint(log, coalesce=True):
    miss = log.missed_reuse()
    if miss is None:
        return ""
    ident, seg, off, nbytes = miss
    return (f". First waste: {log.malloc_words(ident)} asked the device for a new segment while segment "
            f"{seg} had {V.mib(nbytes)} free from offset {_nbytes(off)} on: {REUSE_ADVICE[coalesce]}")


# ---- verdicts (parent) ------------------------------------------------------------------------------------------
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
    v = log.checks()
    if not v.passed:
        return v
    current, top = {}, {}
    for i, (op, ident, nbytes) in enumerate(log.ops.tolist()):
        if op != MALLOC:
            if log.reserved_in_op[i] or log.released_in_op[i]:
                return Verdict.fail(f"a free made the bump allocator ask for or release a segment; its free "
                                    f"does nothing")
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
    v = log.checks()
    if not v.passed:
        return v
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
    frag = (f"fragmentation {log.fragmentation:.0%}: on average {V.mib(log.unused)} of reserved memory held no "
            f"requested byte")
    ok = log.unused <= unused_budget + 1e-9
    w = Verdict(ok, (f"{frag}, within the budget of {V.mib(unused_budget)}" if ok else
                     f"{frag}, over the budget of {V.mib(unused_budget)} ({log.unused / max(unused_budget, 1):.2f}x "
                     f"the budget; the reference: {V.mib(ref.unused)}, {ref.fragmentation:.0%})"))
    both = v & w
    if not both.passed:
        both = Verdict(False, both.message + _reuse_hint(log), both.artifacts)
    return both


def verdict_random(case, obs, ctx):
    """Random mallocs and frees: a valid log; with empty_cache at the end, nothing stays reserved;
    peak reserved within 1.25x of the reference's."""
    log, err = _load(obs, case)
    if err:
        return err
    v = log.checks()
    if not v.passed:
        return v
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
    v = log.checks()
    if not v.passed:
        return v
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
    v = log.checks()
    if not v.passed:
        return v
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
        return err, None, None
    v = log.checks()
    if not v.passed:
        if p.get("limit") is not None and "allowed" in v.message:
            v = Verdict(False, v.message + f" (memory_limit = {V.mib(p['limit'])}: _new_segment must "
                                           f"refuse a segment that would take reserved bytes past it)")
        return v, log, None
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
                        budget=cap, title=f"{case.describe()} on a {V.mib(cap)} card")
    return Verdict(True, f"fits: peak reserved {V.mib(log.peak)} of the {V.mib(cap)} card (the reference "
                         f"needs {V.mib(ref.peak)})", [plot] if plot else [])


@functools.lru_cache(maxsize=8)
def _minigrad_reference(key):
    """Losses and peak reserved bytes of the same training with minigrad's own pool (parent)."""
    import gc
    import minigrad.memory as mem
    from minigrad.memory import CachingAllocator
    p, x, y = _MINIGRAD_INPUTS[key]
    source = TraceSource(real=True)
    alloc = CachingAllocator(source, "reference")
    was = gc.isenabled()
    gc.disable()
    try:
        with mem.enabled("cpu", allocator=alloc):
            losses = _train(p, x, y)
            peak = alloc.stats["all"].reserved_bytes.peak
    finally:
        if was:
            gc.enable()
    return losses, peak


_MINIGRAD_INPUTS = {}


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


# ---- the assignment ---------------------------------------------------------------------------------------------
def _trace(kind, widths, batches, seed=0):
    return {"workload": "training", "kind": kind, "widths": list(widths), "batches": list(batches), "seed": seed}


TRAIN_MLP = _trace("mlp", [64, 512, 512, 10], [41, 171, 234, 130, 212, 136, 84, 192])
TRAIN_CNN = _trace("cnn", [8, 16], [65, 68, 91, 56, 34, 20])
CARD_MLP = _trace("mlp", [64, 2048, 256, 2048, 10], [430, 211, 266, 417, 119, 199, 119, 267])


def _case(label, cls, workload, **extra):
    return Case({**workload, "cls": cls, **extra}, label=label)


def _scen(cls, name, **extra):
    return _case(f"scenario '{name}'", cls, {"workload": "scenario", "name": name}, **extra)


ASSIGNMENT = Assignment(
    id="a2",
    name="a2_memory",
    title="The caching memory pool",
    notebook="a2_memory.ipynb",
    solution="solutions/a2_memory.ipynb",
    preamble="import numpy as np\nimport minigrad as mg\n",
    timeout=30,
    memory_mb=2048,
    forbidden=[r"CachingAllocator", r"\bminigrad\s*\.\s*memory\b", r"\bmg\s*\.\s*memory\b",
               r"from\s+minigrad\s+import[^\n]*\bmemory\b", r"_ALLOCATORS", r"get_allocator",
               r"\bimportlib\b", r"__import__", r"\bsys\s*\.\s*modules\b"],
    parts=[
        Part("part1", "Sizes, pools and a bump allocator", cells=["a2-base", "a2-sizes", "a2-bump"],
             names=["round_size", "pool_of", "segment_size", "BumpAllocator"],
             objective="Round requests, pick a pool and a segment size; carve blocks from segments.", tests=[
            Test("round_size", 3, observe_sizes, verdict_round, inputs_sizes, cases=[{"seed": 0, "n": 40}]),
            Test("pools and segment sizes", 3, observe_sizes, verdict_pools, inputs_sizes,
                 cases=[{"seed": 1, "n": 40}]),
            Test("bump allocator", 4, observe_ops, verdict_bump, inputs_ops, partial=True, cases=[
                _case("random mallocs and frees (seed 0)", "BumpAllocator",
                      {"workload": "random", "seed": 0, "n": 120, "finish": False}),
                _scen("BumpAllocator", "best fit, large pool")]),
        ]),
        Part("part2", "Best fit and splitting", cells=["a2-bestfit"],
             names=["should_split", "BestFitAllocator"],
             objective="Reuse cached free blocks: the smallest that fits, split when the rest is worth keeping.",
             tests=[
            Test("best fit", 3, observe_ops, verdict_best_fit, inputs_ops, partial=True, cases=[
                _scen("BestFitAllocator", "best fit, small pool"),
                _scen("BestFitAllocator", "best fit, large pool"),
                _case("holes between live blocks (seed 0)", "BestFitAllocator", {"workload": "holes", "seed": 0})]),
            Test("splitting", 3, observe_ops, verdict_best_fit, inputs_ops, cases=[
                _scen("BestFitAllocator", "splitting")]),
            Test("random mallocs and frees", 2, observe_ops, verdict_random, inputs_ops, partial=True, cases=[
                _case(f"random (seed {s})", "BestFitAllocator", {"workload": "random", "seed": s, "n": 300,
                                                                 "finish": False}) for s in (1, 2)]),
            Test("memory limit", 2, observe_ops, verdict_oom, inputs_ops, partial=True, cases=[
                _case("scenario 'memory limit' under memory_limit = 30 MiB", "BestFitAllocator",
                      {"workload": "scenario", "name": "memory limit"}, limit=30 * MiB, catch_oom=True),
                _case("scenario 'memory limit' on a 30 MiB device", "BestFitAllocator",
                      {"workload": "scenario", "name": "memory limit"}, capacity=30 * MiB, catch_oom=True)]),
        ]),
        Part("part3", "Coalescing and empty_cache", cells=["a2-coalesce"], names=["CoalescingAllocator"],
             objective="Merge free neighbours so whole segments come back; release them with empty_cache.",
             tests=[
            Test("coalescing", 4, observe_ops, verdict_coalescing, inputs_ops, partial=True, cases=[
                _scen("CoalescingAllocator", "coalescing, small pool"),
                _scen("CoalescingAllocator", "coalescing, large pool")]),
            Test("empty_cache", 3, observe_ops, verdict_empty_cache, inputs_ops, cases=[
                _scen("CoalescingAllocator", "empty_cache")]),
            Test("random mallocs and frees", 3, observe_ops, verdict_random, inputs_ops, partial=True, cases=[
                _case(f"random (seed {s})", "CoalescingAllocator", {"workload": "random", "seed": s, "n": 300})
                for s in (3, 4)]),
            Test("training trace budgets", 5, observe_ops, verdict_training, inputs_ops, partial=True, cases=[
                _case("MLP 64-512-512-10 trace", "CoalescingAllocator", TRAIN_MLP),
                _case("CNN 4-8 channels trace", "CoalescingAllocator", TRAIN_CNN)]),
        ]),
        Part("part4", "Out of memory, and minigrad on your pool", cells=["a2-oom"], names=["StudentAllocator"],
             objective="When the device is full, release the cache and retry, then raise OutOfMemoryError; "
                       "train a model on memory your allocator hands out.", tests=[
            Test("retry after empty_cache", 3, observe_ops, verdict_oom, inputs_ops, partial=True, cases=[
                _scen("StudentAllocator", "retry", capacity=20 * MiB, catch_oom=True),
                _scen("StudentAllocator", "retry, twice", capacity=24 * MiB, catch_oom=True)]),
            Test("OutOfMemoryError", 4, observe_ops, verdict_oom, inputs_ops, partial=True, cases=[
                _case("scenario 'out of memory' on a 36 MiB device", "StudentAllocator",
                      {"workload": "scenario", "name": "out of memory"}, capacity=36 * MiB, catch_oom=True),
                _case("scenario 'out of memory' under memory_limit = 36 MiB", "StudentAllocator",
                      {"workload": "scenario", "name": "out of memory"}, limit=36 * MiB, catch_oom=True)]),
            Test("8 GB card", 4, observe_ops, verdict_card, inputs_ops, cases=[
                _case("MLP 64-2048-256-2048-10 trace on a 64 MiB card", "StudentAllocator", CARD_MLP,
                      capacity=CARD, catch_oom=True)]),
            Test("minigrad trains on your pool", 4, observe_minigrad, verdict_minigrad, inputs_minigrad, cases=[
                Case({"seed": 0, "widths": [64, 256, 256, 10], "batches": [96, 128, 32, 128, 64]},
                     label="MLP 64-256-256-10, 5 Adam steps")]),
        ]),
    ],
)
