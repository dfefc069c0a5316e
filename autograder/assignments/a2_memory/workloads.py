"""The operations every case runs (parent): crafted scenarios, random sequences, and the allocation
trace of real minigrad training runs."""
import functools

import numpy as np

from .log_reader import _rounded
from .trace_device import EMPTY, FREE, MALLOC, KiB, MiB


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
