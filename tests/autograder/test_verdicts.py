"""Verdict helpers: array comparison, numerical gradients, trace replay, budgets, plots."""
import numpy as np
import pytest

from autograder import verdicts as V


def test_compare_names_worst_element():
    exp = np.arange(6.0).reshape(2, 3)
    got = exp.copy()
    got[1, 2] += 1.0
    got[0, 1] += 1e-3
    v = V.compare("op", got, exp)
    assert not v.passed and "index (1, 2)" in v.message and "got 6" in v.message and "expected 5" in v.message
    assert "2 of 6 elements" in v.message
    assert V.compare("op", exp, exp).passed


@pytest.mark.parametrize("got,needle", [
    (np.zeros(3), "has shape (3,), expected (2, 3)"),
    (np.full((2, 3), np.nan), "NaN or infinite"),
    (np.zeros((2, 3), complex), "complex"),
    (None, "no value"),
])
def test_compare_rejects(got, needle):
    v = V.compare("op", got, np.ones((2, 3)))
    assert not v.passed and needle in v.message


def test_numeric_vjp_matches_analytic():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    up = rng.standard_normal((3, 2))
    ga, gb = V.numeric_vjp(lambda a, b: a @ b, [a, b], up)
    np.testing.assert_allclose(ga, up @ b.T, rtol=1e-6)
    np.testing.assert_allclose(gb, a.T @ up, rtol=1e-6)
    ga2, gb2 = V.numeric_vjp(lambda a, b: a @ b, [a, b], up, wrt=[1])
    assert ga2 is None and np.allclose(gb2, gb)


def test_check_gradient_message():
    num = np.array([1.0, 2.0, 3.0])
    v = V.check_gradient("exp", "x", np.array([1.0, 2.0, 6.0]), num)
    assert not v.passed
    assert v.message.startswith("exp: gradient w.r.t. `x` wrong at index (2,): analytic 6, numeric 3")
    assert "relative error 0.5" in v.message
    assert "shape (2,), expected (3,)" in V.check_gradient("exp", "x", np.ones(2), num).message
    assert V.check_gradient("exp", "x", num + 1e-9, num).passed


def test_replay_accepts_a_good_trace_and_measures_it():
    ev = np.array([[V.RESERVE, 0, 0, 1024], [V.ALLOC, 1, 0, 256], [V.ALLOC, 2, 256, 512],
                   [V.FREE, 1, 0, 0], [V.ALLOC, 3, 0, 128], [V.FREE, 2, 0, 0], [V.FREE, 3, 0, 0],
                   [V.RELEASE, 0, 0, 0]])
    rep = V.replay(ev, alignment=128, capacity=4096)
    assert rep.ok, rep.violations
    assert rep.peak_allocated == 768 and rep.peak_reserved == 1024
    assert rep.unused_share == pytest.approx(1.0)       # at the first peak of reservation nothing is allocated
    assert rep.fragmentation == pytest.approx(0.0)      # after its allocations: one free hole [768, 1024)
    assert list(rep.allocated) == [0, 256, 768, 512, 640, 128, 0, 0]


def test_replay_fragmentation_is_minigrads_at_the_peak_of_reservation():
    """Two segments; at the second reservation, free holes of 256 and 512 B (segment 0) and 1536 B
    (segment 1, after the block it was reserved for): 1 - 1536 / 2304, as fragmentation_of computes."""
    from minigrad.memory import fragmentation_of
    ev = np.array([[V.RESERVE, 0, 0, 1024], [V.ALLOC, 1, 0, 256], [V.ALLOC, 2, 256, 256],
                   [V.ALLOC, 3, 512, 512], [V.FREE, 1, 0, 0], [V.FREE, 3, 0, 0],
                   [V.RESERVE, 1, 4096, 2048], [V.ALLOC, 4, 4096, 512], [V.FREE, 2, 0, 0]])
    rep = V.replay(ev, alignment=256)
    assert rep.ok, rep.violations
    assert rep.fragmentation == pytest.approx(fragmentation_of([256, 512, 1536])) == pytest.approx(1 - 1536 / 2304)
    assert rep.unused_share == pytest.approx(1 - 256 / 3072)    # at the RESERVE itself, only block 2 live


@pytest.mark.parametrize("events,needle", [
    ([[1, 0, 0, 100], [3, 1, 0, 64], [3, 2, 32, 16]], "overlaps the live block [0, 64)"),
    ([[1, 0, 0, 100], [3, 1, 8, 16]], "not a multiple of the alignment 16"),
    ([[1, 0, 0, 100], [3, 1, 96, 16]], "not inside a reserved segment"),
    ([[1, 0, 0, 100], [4, 7, 0, 0]], "frees a block that is not live"),
    ([[1, 0, 0, 100], [3, 1, 0, 16], [2, 0, 0, 0]], "still holds a live block"),
    ([[1, 0, 0, 100], [1, 1, 64, 100]], "overlaps live segment 0"),
    ([[1, 0, 0, 5000]], "more than the device's 4096"),
])
def test_replay_finds_violations(events, needle):
    rep = V.replay(np.array(events, dtype=np.int64), alignment=16, capacity=4096)
    assert not rep.ok and any(needle in m for m in rep.violations), rep.violations


def test_replay_rejects_bad_arrays():
    assert not V.replay(np.zeros((3, 3), np.int64)).ok
    assert not V.replay(np.zeros((3, 4), np.float64)).ok


def test_budget_and_plot(tmp_path):
    path = V.plot_timeline(tmp_path / "t.png", {"reserved": np.array([0, 10, 30, 20])}, budget=25, title="t")
    assert open(path, "rb").read(4) == b"\x89PNG"
    v = V.check_budget("peak reserved", 3 * 2**20, 2 * 2**20, reference=1.6 * 2**20, plot=path)
    assert not v.passed and v.artifacts == [path]
    assert "3.00 MiB is over the budget of 2.00 MiB (1.50x the budget); the reference needs 1.60 MiB" in v.message
    assert V.check_budget("peak", 1, 2).passed
