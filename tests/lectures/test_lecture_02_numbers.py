"""Facts that lectures/02_memory.ipynb states in its prose: if one of these fails, the lecture's text is wrong.

Each test mirrors one section of the lecture with the same shapes, on a fresh pool, and asserts the
numbers the markdown relies on (not the notebook's printed output, which CI only executes).
"""
import gc
import math
import os

import numpy as np
import pytest

import minigrad as mg
import minigrad.memory as mem
import minigrad.nn.functional as F
from minigrad.memory import MiB, CachingAllocator, CPUSource, SimulatedSource, round_size, segment_size


@pytest.fixture
def pool():
    """The cpu pool with a fresh allocator (stats from zero); no limit, no history afterwards."""
    with mem.enabled("cpu", allocator=CachingAllocator(CPUSource(), "cpu")) as alloc:
        yield alloc
        alloc.memory_limit = None
        alloc.history = None


def make_mlp(widths):
    params = []
    for fan_in, fan_out in zip(widths[:-1], widths[1:]):
        w = mg.randn(fan_out, fan_in)
        w.mul_((2 / fan_in) ** 0.5)
        params += [w.requires_grad_(), mg.zeros(fan_out, requires_grad=True)]
    return params


def forward(params, x):
    h = x
    for k in range(0, len(params) - 2, 2):
        h = F.relu(F.linear(h, params[k], params[k + 1]))
    return F.linear(h, params[-2], params[-1])


def adam_step(params, state, t, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8):
    with mg.no_grad():
        for p, (m, v) in zip(params, state):
            g = p.grad
            m.mul_(b1).add_(g * (1 - b1))
            v.mul_(b2).add_(g * g * (1 - b2))
            p.sub_(lr / (1 - b1 ** t) * m / ((v / (1 - b2 ** t)).sqrt() + eps))


def adam_step_inplace(params, state, t, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8):
    for p, (m, v) in zip(params, state):
        w, g, m, v = p.array, p.grad.array, m.array, v.array
        tmp = mg.empty_like(p).array
        m *= b1; np.multiply(g, 1 - b1, out=tmp); m += tmp
        v *= b2; np.multiply(g, g, out=tmp); tmp *= 1 - b2; v += tmp
        np.sqrt(v, out=tmp); tmp /= math.sqrt(1 - b2 ** t); tmp += eps
        np.divide(m, tmp, out=tmp); tmp *= -lr / (1 - b1 ** t); w += tmp


def train_step(params, state, x, y, t):
    loss = F.cross_entropy(forward(params, x), y)
    loss.backward()
    adam_step_inplace(params, state, t)
    for p in params:
        p.grad = None


def test_section1_mlp_memory_is_predicted_from_shapes(pool):
    B, widths = 512, [784, 1024, 1024, 1024, 10]
    P = sum(o * i + o for i, o in zip(widths[:-1], widths[1:]))
    params = make_mlp(widths)
    gc.collect()
    assert mem.memory_requested() == 4 * P
    x, y = mg.randn(B, 784), mg.randint(0, 10, (B,))
    before = mem.memory_requested()
    mem.reset_peak_memory_stats()
    loss = F.cross_entropy(forward(params, x), y)
    # saved for backward: the three ReLU outputs (Linear's saved input is the same array), what the loss
    # saves (log-probabilities, int64 target, bool mask, float weight per sample), plus the loss itself
    assert mem.memory_requested() - before == 3 * B * 1024 * 4 + B * (10 * 4 + 8 + 1 + 4) + 4
    # the forward peak is one pre-activation above the end state
    loss_saved = sum(round_size(B * n) for n in (10 * 4, 8, 1, 4))    # born after the last pre-activation died
    assert mem.max_memory_allocated() - mem.memory_allocated() == \
        round_size(B * 1024 * 4) - round_size(4) - loss_saved
    loss.backward()
    del loss
    gc.collect()
    assert mem.memory_requested() - before == 4 * P              # activations gone, one gradient each
    assert mem.memory_allocated() - mem.memory_requested() > 0    # rounding and unsplit large blocks
    state = [(mg.zeros_like(p), mg.zeros_like(p)) for p in params]
    assert mem.memory_requested() - before == 4 * P + 8 * P       # Adam: two states per parameter
    largest = round_size(max(p.nbytes for p in params))
    for step, workspace in [(adam_step, 3 * largest), (adam_step_inplace, largest)]:
        start = mem.memory_allocated()
        mem.reset_peak_memory_stats()
        step(params, state, 2)
        assert mem.max_memory_allocated() - start == pytest.approx(workspace, abs=4096)
        assert mem.memory_allocated() == start


def test_section1_activations_scale_with_the_batch(pool):
    params = make_mlp([784, 1024, 1024, 1024, 10])
    for b in (64, 256):
        x, y = mg.randn(b, 784), mg.randint(0, 10, (b,))
        before = mem.memory_requested()
        loss = F.cross_entropy(forward(params, x), y)
        assert mem.memory_requested() - before - 4 == b * (3 * 1024 * 4 + 10 * 4 + 8 + 1 + 4)
        del loss


def test_section2_rounding_table():
    assert [round_size(n) for n in (1, 512, 513, 4000)] == [512, 512, 1024, 4096]
    assert segment_size(round_size(MiB)) == 2 * MiB
    assert segment_size(round_size(MiB + 1)) == 20 * MiB
    assert segment_size(round_size(10 * MiB)) == 10 * MiB
    assert segment_size(round_size(33 * MiB + 5)) == 34 * MiB


def test_section2_walkthrough():
    sim = CachingAllocator(SimulatedSource(), "sim")
    a, b, c = sim.malloc(3 * MiB, "a"), sim.malloc(5 * MiB, "b"), sim.malloc(2 * MiB, "c")
    seg = a.segment
    assert [x.size for x in seg.blocks()] == [3 * MiB, 5 * MiB, 2 * MiB, 10 * MiB]
    sim.free(b)
    d = sim.malloc(4 * MiB, "d")
    assert d.offset == 3 * MiB and d.size == 5 * MiB            # best fit: the hole, not the tail; no split
    e = sim.malloc(1000, "e")
    assert e.size == 1024 and e.segment.pool == "small_pool" and e.segment.size == 2 * MiB
    sim.free(a)
    sim.free(d)
    assert [(x.size, x.allocated) for x in seg.blocks()] == [(8 * MiB, False), (2 * MiB, True),
                                                              (10 * MiB, False)]
    sim.free(c)
    sim.free(e)
    assert all(s.is_free() for s in sim.segments.values())
    assert sim.empty_cache() == 22 * MiB and sim.reserved_bytes() == 0


def test_section3_fragmentation_workload():
    card = CachingAllocator(SimulatedSource(capacity=20 * MiB), "card")
    kept, temps = [], []
    for layer in range(5):
        kept.append(card.malloc(2 * MiB, f"act{layer}"))
        temps.append(card.malloc(2 * MiB, f"tmp{layer}"))
    for t in temps:
        card.free(t)
    assert card.reserved_bytes() - card.allocated_bytes() == 10 * MiB
    assert card.fragmentation() == pytest.approx(0.8)
    with pytest.raises(mg.OutOfMemoryError, match="out of memory allocating 6 MiB"):
        card.malloc(6 * MiB, "big")
    assert card.num_alloc_retries == 1 and card.num_ooms == 1
    assert card.empty_cache() == 0
    for blk in kept:
        card.free(blk)
    assert card.fragmentation() == 0.0 and len(card.free_blocks["large_pool"]) == 1
    assert card.malloc(6 * MiB, "big").size == 6 * MiB


def test_section4_timeline_is_a_sawtooth(pool):
    params = make_mlp([784, 256, 256, 10])
    state = [(mg.zeros_like(p), mg.zeros_like(p)) for p in params]
    x, y = mg.randn(128, 784), mg.randint(0, 10, (128,))
    mem.empty_cache()
    mem.record_memory_history(True)
    for t in (1, 2, 3):
        with mem.label(f"step{t}"):
            train_step(params, state, x, y, t)
    events = mem.snapshot()["events"]
    mem.record_memory_history(False)
    new_segments = {t: sum(e["action"] == "segment_alloc" and e["label"] == f"step{t}" for e in events)
                    for t in (1, 2, 3)}
    assert new_segments[1] > 0 and new_segments[2] == new_segments[3] == 0   # then every step is a cache hit
    ends = {}                          # allocated bytes after the last event of each step
    for e in events:
        ends[e["label"]] = e["allocated_bytes"]
    assert ends["step2"] == ends["step3"]                       # back to the same level: no leak
    assert {e["op"] for e in events} >= {"relu", "linear.backward"}


def test_section6_small_card(pool):
    mem.set_memory_limit(64 * MiB)
    params = make_mlp([784, 512, 512, 512, 10])
    state = [(mg.zeros_like(p), mg.zeros_like(p)) for p in params]
    P = sum(p.numel() for p in params)

    def try_batch(batch):
        mem.empty_cache()
        mem.reset_peak_memory_stats()
        x, y = mg.randn(batch, 784), mg.randint(0, 10, (batch,))
        train_step(params, state, x, y, 1)
        return mem.max_memory_reserved()

    with pytest.raises(mg.OutOfMemoryError) as info:
        try_batch(8192)
    message = str(info.value)
    assert "out of memory allocating 16 MiB" in message and "alloc retries: 1" in message
    del info
    gc.collect()
    assert mem.memory_requested() == 12 * P                     # the failed step left nothing behind
    assert try_batch(1024) <= 48 * MiB                          # fits with room to spare
    gc.collect()
    # gradient accumulation: 8192 samples as 8 micro-batches of 1024 fit the same card
    mem.empty_cache()
    mem.reset_peak_memory_stats()
    host_x = np.random.default_rng(0).standard_normal((8192, 784), dtype=np.float32)
    host_y = np.random.default_rng(1).integers(0, 10, 8192)
    for i in range(0, 8192, 1024):
        loss = F.cross_entropy(forward(params, mg.tensor(host_x[i:i + 1024])),
                               mg.tensor(host_y[i:i + 1024])) * (1024 / 8192)
        loss.backward()
    assert mem.max_memory_reserved() <= 56 * MiB


def test_section5_malloc_trim_returns_released_segments_to_the_os():
    """empty_cache() hands segments to glibc, which keeps the pages; malloc_trim(0) gives them back."""
    ctypes = pytest.importorskip("ctypes")
    try:
        trim = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        pytest.skip("no glibc: the C library decides by itself when to return memory")

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    with mem.enabled("cpu", allocator=CachingAllocator(CPUSource(), "cpu")):
        blocks = [mg.ones(5 * MiB // 4) for _ in range(12)]  # 60 MiB in 20 MiB segments, pages touched
        del blocks
        gc.collect()
        trim(0)
        before = rss()
        released = mem.empty_cache()
        trim(0)
        assert released == 60 * MiB
        assert before - rss() >= 0.8 * released


def test_section6_a_smaller_batch_peaks_higher_through_the_small_pool(pool):
    """Batch 256's activations (512 KiB) are small-pool requests: new 2 MiB segments, while the large pool's
    free room (which batch 1024's 2 MiB activations use) stays unused. So 256 peaks above 1024."""
    mem.set_memory_limit(64 * MiB)
    params = make_mlp([784, 512, 512, 512, 10])
    state = [(mg.zeros_like(p), mg.zeros_like(p)) for p in params]

    def try_batch(batch):
        mem.empty_cache()
        mem.reset_peak_memory_stats()
        start = mem.memory_stats()
        train_step(params, state, mg.randn(batch, 784), mg.randint(0, 10, (batch,)), 1)
        s = mem.memory_stats()
        return s["reserved_bytes.all.peak"], {p: s[f"reserved_bytes.{p}.peak"] - start[f"reserved_bytes.{p}.current"]
                                              for p in ("small_pool", "large_pool")}

    (r256, grew256), (r1024, grew1024) = try_batch(256), try_batch(1024)
    assert r256 > r1024
    assert grew256["small_pool"] > grew1024["small_pool"] and grew256["large_pool"] == grew1024["large_pool"] == 0
