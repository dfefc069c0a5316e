"""Learning-rate schedules against PyTorch's closed-form values."""
import math

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn, optim
from minigrad.optim import lr_scheduler as S


def _opt(lr=0.1, cls=optim.SGD, groups=1, **kw):
    params = [nn.Parameter(mg.zeros(1)) for _ in range(groups)]
    return cls([{"params": [p], "lr": lr * (i + 1)} for i, p in enumerate(params)], lr=lr, **kw)


def _run(sched, n):
    """lrs at epochs 0..n-1 (the value set at construction, then after each step)."""
    out = [sched.get_last_lr()]
    for _ in range(n - 1):
        sched.optimizer.step()
        sched.step()
        out.append(sched.get_last_lr())
    return np.array(out)


def _close(got, expected):
    np.testing.assert_allclose(got, np.asarray(expected, dtype=float).reshape(got.shape), rtol=1e-10, atol=1e-15)


def test_step_lr():
    s = S.StepLR(_opt(groups=2), step_size=3, gamma=0.5)
    got = _run(s, 10)
    _close(got[:, 0], [0.1 * 0.5 ** (t // 3) for t in range(10)])
    _close(got[:, 1], [0.2 * 0.5 ** (t // 3) for t in range(10)])


def test_multistep_lr():
    s = S.MultiStepLR(_opt(), milestones=[2, 5, 5, 8], gamma=0.1)
    got = _run(s, 10)[:, 0]
    from bisect import bisect_right
    _close(got, [0.1 * 0.1 ** bisect_right([2, 5, 5, 8], t) for t in range(10)])


def test_exponential_lr():
    _close(_run(S.ExponentialLR(_opt(), gamma=0.9), 8)[:, 0], [0.1 * 0.9 ** t for t in range(8)])


def test_cosine_annealing_lr_including_past_T_max():
    T, eta = 10, 0.01
    got = _run(S.CosineAnnealingLR(_opt(groups=2), T_max=T, eta_min=eta), 25)
    for g, base in enumerate([0.1, 0.2]):
        _close(got[:, g], [eta + (base - eta) * (1 + math.cos(math.pi * t / T)) / 2 for t in range(25)])


def test_lambda_and_multiplicative_lr():
    got = _run(S.LambdaLR(_opt(groups=2), [lambda e: 0.95 ** e, lambda e: 1 / (e + 1)]), 6)
    _close(got[:, 0], [0.1 * 0.95 ** t for t in range(6)])
    _close(got[:, 1], [0.2 / (t + 1) for t in range(6)])
    got = _run(S.MultiplicativeLR(_opt(), lambda e: 0.5), 4)[:, 0]
    _close(got, [0.1, 0.05, 0.025, 0.0125])


@pytest.mark.parametrize("start,end,total", [(1 / 3, 1.0, 5), (0.5, 0.1, 4), (1.0, 0.0, 3)])
def test_linear_lr(start, end, total):
    got = _run(S.LinearLR(_opt(), start_factor=start, end_factor=end, total_iters=total), 9)[:, 0]
    _close(got, [0.1 * (start + (end - start) * min(t, total) / total) for t in range(9)])
    with pytest.raises(ValueError):
        S.LinearLR(_opt(), start_factor=0.0)


def test_constant_lr():
    got = _run(S.ConstantLR(_opt(), factor=0.25, total_iters=3), 6)[:, 0]
    _close(got, [0.025, 0.025, 0.025, 0.1, 0.1, 0.1])


def test_sequential_lr_warmup_then_cosine_and_the_helper():
    W, total, base, eta = 4, 14, 0.1, 0.001
    expected = [base * (t + 1) / (W + 1) if t < W else
                eta + (base - eta) * (1 + math.cos(math.pi * (t - W) / (total - W))) / 2 for t in range(total + 1)]
    opt = _opt(base)
    warm = S.LinearLR(opt, start_factor=1 / (W + 1), total_iters=W)
    cos = S.CosineAnnealingLR(opt, T_max=total - W, eta_min=eta)
    seq = S.SequentialLR(opt, [warm, cos], milestones=[W])
    _close(_run(seq, total + 1)[:, 0], expected)
    helper = S.warmup_cosine(_opt(base), warmup_steps=W, total_steps=total, min_lr=eta)
    got = _run(helper, total + 1)[:, 0]
    _close(got, expected)
    assert got[-1] == pytest.approx(eta) and got[W] == pytest.approx(base)
    plain = S.warmup_cosine(_opt(base), 0, 10)
    assert isinstance(plain, S.CosineAnnealingLR)
    with pytest.raises(ValueError):
        S.warmup_cosine(_opt(), 10, 5)


def test_sequential_lr_three_schedulers():
    opt = _opt(1.0)
    a = S.ConstantLR(opt, factor=0.5, total_iters=10)
    b = S.ExponentialLR(opt, gamma=0.5)
    c = S.StepLR(opt, step_size=2, gamma=0.1)
    seq = S.SequentialLR(opt, [a, b, c], milestones=[2, 4])
    got = _run(seq, 8)[:, 0]
    _close(got, [0.5, 0.5, 1.0, 0.5, 1.0, 1.0, 0.1, 0.1])


def _onecycle_ref(t, total, max_lr, pct, div, final_div, three_phase, anneal):
    init = max_lr / div
    min_lr = init / final_div
    if three_phase:
        phases = [(pct * total - 1, init, max_lr), (2 * pct * total - 2, max_lr, init), (total - 1, init, min_lr)]
    else:
        phases = [(pct * total - 1, init, max_lr), (total - 1, max_lr, min_lr)]
    start = 0.0
    for i, (end, a, b) in enumerate(phases):
        if t <= end or i == len(phases) - 1:
            pct_t = (t - start) / (end - start)
            if anneal == "cos":
                return b + (a - b) / 2 * (math.cos(math.pi * pct_t) + 1)
            return (b - a) * pct_t + a
        start = end


@pytest.mark.parametrize("three_phase,anneal", [(False, "cos"), (True, "cos"), (False, "linear")])
def test_one_cycle_lr(three_phase, anneal):
    total = 20
    opt = _opt(0.1, momentum=0.9)
    s = S.OneCycleLR(opt, max_lr=1.0, total_steps=total, pct_start=0.25, three_phase=three_phase,
                     anneal_strategy=anneal)
    got = _run(s, total)[:, 0]
    _close(got, [_onecycle_ref(t, total, 1.0, 0.25, 25.0, 1e4, three_phase, anneal) for t in range(total)])
    assert got[0] == pytest.approx(0.04) and got.max() == pytest.approx(1.0)
    assert opt.param_groups[0]["momentum"] == pytest.approx(0.95)   # back at max_momentum at the end
    with pytest.raises(ValueError, match="Tried to step"):
        s.step()
        s.step()


def test_one_cycle_cycles_adam_beta1_and_uses_epochs():
    opt = _opt(0.1, cls=optim.Adam)
    s = S.OneCycleLR(opt, max_lr=0.5, epochs=2, steps_per_epoch=5)
    assert s.total_steps == 10
    assert opt.param_groups[0]["betas"][0] == pytest.approx(0.95)
    for _ in range(3):
        s.step()
    b1 = opt.param_groups[0]["betas"][0]
    assert 0.85 <= b1 < 0.95 and opt.param_groups[0]["betas"][1] == 0.999
    with pytest.raises(ValueError):
        S.OneCycleLR(_opt(), max_lr=1.0)


def test_scheduler_state_dict_resumes():
    opt = _opt()
    s = S.CosineAnnealingLR(opt, T_max=10)
    for _ in range(4):
        s.step()
    sd = s.state_dict()
    assert "optimizer" not in sd and sd["last_epoch"] == 4
    opt2 = _opt()
    s2 = S.CosineAnnealingLR(opt2, T_max=10)
    s2.load_state_dict(sd)
    opt2.param_groups[0]["lr"] = opt.param_groups[0]["lr"]
    for _ in range(3):
        s.step()
        s2.step()
    assert s2.get_last_lr() == pytest.approx(s.get_last_lr())
    seq = S.warmup_cosine(_opt(), 2, 10)
    for _ in range(5):
        seq.step()
    sd = seq.state_dict()
    seq2 = S.warmup_cosine(_opt(), 2, 10)
    seq2.load_state_dict(sd)
    assert seq2.last_epoch == 5 and seq2._schedulers[1].last_epoch == seq._schedulers[1].last_epoch
    lam = S.LambdaLR(_opt(), lambda e: 1.0)
    assert lam.state_dict()["lr_lambdas"] == [None]


def test_resuming_with_last_epoch_requires_initial_lr():
    opt = _opt()
    with pytest.raises(KeyError, match="initial_lr"):
        S.StepLR(opt, 2, last_epoch=3)
    opt.param_groups[0]["initial_lr"] = 0.1
    s = S.StepLR(opt, 2, gamma=0.5, last_epoch=3)
    assert s.last_epoch == 4
