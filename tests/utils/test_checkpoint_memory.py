"""Checkpointing's memory, asserted on the pool's exact byte counts (deterministic, unlike time).

*Peak activation memory* of a step: the most bytes ever live at once among the blocks allocated by
forward ops during the step (recomputations in backward included; gradients, made by ``*.backward``
ops, excluded), from the pool's history (``planner.lower_bound(lifetimes, planner.forward_only)``).
"""
import pytest

import minigrad as mg
import minigrad.memory as mem
from minigrad import nn
from minigrad.memory import planner
from minigrad.utils.checkpoint import checkpoint, checkpoint_sequential, create_selective_checkpoint_contexts

MiB = 2 ** 20


@pytest.fixture(scope="module")
def deep_mlp():
    """32 x (Linear(1024, 1024) + ReLU) at batch 256: one 1 MiB activation kept per layer (ReLU's output,
    which the next Linear saves too). Built inside the pool, so saving weights copies nothing."""
    mg.manual_seed(0)
    with mem.enabled("cpu"):
        model = nn.Sequential(*[nn.Sequential(nn.Linear(1024, 1024), nn.ReLU()) for _ in range(32)])
        x = mg.randn(256, 1024)
    yield model, x
    mem.disable("cpu")


def activation_peak(step):
    return planner.lower_bound(planner.record(step).lifetimes, planner.forward_only)


def step_of(model, x, segments=None):
    def step():
        model.zero_grad(set_to_none=True)
        out = model(x) if segments is None else checkpoint_sequential(model, segments, x)
        out.sum().backward()
    return step


def test_sqrt_n_segments_memory(deep_mlp):
    model, x = deep_mlp
    base = activation_peak(step_of(model, x))
    assert base // MiB == 33          # 32 kept activations + the one being computed
    segments = 6                      # ~ sqrt(32)
    peak = activation_peak(step_of(model, x, segments))
    size = 32 // segments
    last = 32 - size * (segments - 1)
    # Chen et al.: the segment boundaries + the uncheckpointed last segment + the one in the making: 5 + 7 + 1
    assert peak // MiB == (segments - 1) + last + 1 == 13
    assert peak <= 0.40 * base        # 39 %: sqrt(n) segments keep ~2 sqrt(n) = 35 % of n layers, + 1 transient


def test_nested_checkpoint_pins_nothing(deep_mlp):
    model, x = deep_mlp
    head, body = model[:4], model[4:8]

    def live_after(forward):
        """Bytes of forward allocations still live when ``forward()`` has returned (its output held)."""
        lifetimes = planner.record(forward).lifetimes
        end = max(lt.end for lt in lifetimes)
        return sum(lt.size for lt in lifetimes if lt.end == end and planner.forward_only(lt))
    assert live_after(lambda: body(head(x))) // MiB == 8
    assert live_after(lambda: checkpoint(lambda t: body(head(t)), x)) // MiB == 1
    # the inner checkpoint's input (head's output) is kept as a handle of the outer one, not pinned
    assert live_after(lambda: checkpoint(lambda t: checkpoint(body, head(t)), x)) // MiB == 1

    def nested():
        model.zero_grad(set_to_none=True)
        checkpoint(lambda t: checkpoint(body, head(t)), x).sum().backward()
    # in backward the outer recomputation brings head's 4 activations back, the inner one body's 4
    assert activation_peak(nested) // MiB == 9


def test_selective_policy_trades_memory_back(deep_mlp):
    model, x = deep_mlp
    part = model[:8]

    def run(context_fn=None):
        def step():
            model.zero_grad(set_to_none=True)
            checkpoint(part, x, context_fn=context_fn).sum().backward()
        return activation_peak(step)
    keep = create_selective_checkpoint_contexts(["linear"])
    full, selective = run(), run(lambda: keep)
    # recomputing everything: 8 activations + the one in the making during the recomputation; keeping
    # the Linear outputs keeps 8 MiB through the forward, and only the 8 ReLUs are recomputed
    assert full // MiB == 9
    assert selective // MiB == 16
