"""The offline memory planner: lifetimes from the pool's history, greedy-by-size offsets, the live-bytes
lower bound, plan checks, and replays that give bit-identical results."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import minigrad as mg
from minigrad import nn
from minigrad.memory import planner
from minigrad.memory.planner import Lifetime, Plan, PlannerError
from minigrad.nn import functional as F


def lts(*spec):
    """Lifetimes from (size in 512-byte units, start, end) triples."""
    return [Lifetime(i, 512 * s, 512 * s, a, b, f"t{i}", None, f"t{i}") for i, (s, a, b) in enumerate(spec)]


def test_lifetimes_from_events():
    events = [
        {"seq": 0, "action": "segment_alloc", "address": 0, "size": 2048, "requested": 2048, "cause": None,
         "label": None, "op": None},
        {"seq": 1, "action": "alloc", "address": 0, "size": 1024, "requested": 100, "cause": "a", "label": None, "op": "a"},
        {"seq": 2, "action": "alloc", "address": 512, "size": 1024, "requested": 1024, "cause": "b",
         "label": "fwd", "op": "b"},
        {"seq": 3, "action": "free", "address": 0, "size": 512, "requested": 100, "cause": "a", "label": None, "op": "a"},
        {"seq": 4, "action": "free", "address": 9999, "size": 512, "requested": 1, "cause": "old", "label": None, "op": "old"},
        {"seq": 5, "action": "alloc", "address": 0, "size": 512, "requested": 512, "cause": "c", "label": None, "op": "c"},
    ]
    got = planner.lifetimes_from_events(events)
    assert [(lt.size, lt.start, lt.end, lt.cause) for lt in got] == [
        (512, 1, 3, "a"), (1024, 2, 6, "b"), (512, 5, 6, "c")]   # still live at the end: up to 6


def test_lower_bound_and_greedy_plan_on_a_known_case():
    # a big tensor alive throughout, two medium ones one after the other, a small one overlapping both
    lifetimes = lts((8, 0, 10), (4, 1, 4), (4, 5, 9), (2, 3, 6))
    assert planner.lower_bound(lifetimes) == 512 * (8 + 4 + 2)
    p = planner.plan(lifetimes)
    assert p.offsets[0] == 0 and p.offsets[1] == p.offsets[2] == 512 * 8   # the two medium share a slot
    assert p.arena_size == 512 * 14 == planner.lower_bound(lifetimes)
    assert planner.check_plan(lifetimes, p) == p.arena_size


def test_check_plan_rejects_overlap_misalignment_and_small_arena():
    lifetimes = lts((2, 0, 5), (2, 3, 8))
    with pytest.raises(PlannerError, match="live at the same time but overlap"):
        planner.check_plan(lifetimes, [0, 512])
    with pytest.raises(PlannerError, match="multiples of 512"):
        planner.check_plan(lifetimes, [0, 1500])
    with pytest.raises(PlannerError, match="arena has"):
        planner.check_plan(lifetimes, Plan([0, 1024], 1024))
    assert planner.check_plan(lts((2, 0, 3), (2, 3, 8)), [0, 0]) == 1024   # [0, 3) and [3, 8) don't meet


@given(st.lists(st.tuples(st.integers(1, 64), st.integers(0, 50), st.integers(1, 30)), min_size=1,
                max_size=60))
def test_greedy_plans_are_valid_and_tight_enough(spec):
    lifetimes = lts(*[(s, a, a + d) for s, a, d in spec])
    p = planner.plan(lifetimes)
    planner.check_plan(lifetimes, p)
    bound = planner.lower_bound(lifetimes)
    assert bound <= p.arena_size <= sum(lt.size for lt in lifetimes)


def mlp_step():
    model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Dropout(0.2), nn.Linear(128, 128), nn.GELU(),
                          nn.Linear(128, 10))
    x, y = mg.randn(64, 32), mg.randint(0, 10, (64,))
    return model, lambda: F.cross_entropy(model(x), y)


def cnn_step():
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(16 * 4 * 4, 10))
    x, y = mg.randn(16, 1, 8, 8), mg.randint(0, 10, (16,))
    return model, lambda: F.cross_entropy(model(x), y)


def gpt_step():
    from minigrad.examples.tiny_gpt import TinyGPT, lm_loss
    model = TinyGPT(vocab_size=20, block_size=16, d_model=32, n_layer=2, n_head=4, dropout=0.1)
    idx = mg.randint(0, 20, (4, 16))
    return model, lambda: lm_loss(model(idx[:, :-1]), idx[:, 1:])


@pytest.mark.parametrize("make", [mlp_step, cnn_step, gpt_step], ids=["mlp", "cnn", "gpt"])
def test_replay_with_planned_offsets_is_identical(make):
    model, loss_fn = make()

    def step():
        mg.manual_seed(5)                     # the same dropout masks every time
        model.zero_grad(set_to_none=True)
        loss = loss_fn()
        loss.backward()
        return [loss.detach().numpy().copy()] + [p.grad.numpy().copy() for p in model.parameters()]
    trace = planner.record(step)
    p = planner.plan(trace.lifetimes)
    bound = planner.lower_bound(trace.lifetimes)
    assert bound <= trace.peak_allocated    # the fresh pool held the step's blocks (some unsplit, larger)
    assert bound <= p.arena_size <= trace.peak_reserved
    assert p.arena_size <= 1.25 * bound
    again = planner.replay(step, trace.lifetimes, p)
    for a, b in zip(trace.result, again):
        np.testing.assert_array_equal(a, b)


def test_replay_of_a_different_step_raises():
    x = mg.randn(64, 64)
    trace = planner.record(lambda: (x @ x).sum())
    p = planner.plan(trace.lifetimes)
    with pytest.raises(PlannerError, match="does not match the recorded step"):
        planner.replay(lambda: (x[:32] @ x).sum(), trace.lifetimes, p)


def test_planned_allocator_refuses_to_overlap_a_live_block():
    lifetimes = lts((2, 0, 5), (2, 1, 8))
    alloc = planner.PlannedAllocator(lifetimes, Plan([0, 512], 1536))    # a wrong plan, unchecked
    first = alloc.malloc(1024, "t0")
    assert alloc.allocated_bytes() == 1024
    with pytest.raises(PlannerError, match="overlaps live block 0"):
        alloc.malloc(1024, "t1")
    alloc.free(first)
    assert alloc.allocated_bytes() == 0
