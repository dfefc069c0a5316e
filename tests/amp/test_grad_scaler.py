"""GradScaler: skipped steps leave everything bit-identical, the scale follows PyTorch's rule exactly,
unscale_/step ordering errors, clipping, accumulation, param groups, several optimizers, checkpoints."""
import numpy as np
import pytest

import minigrad as mg
import minigrad.nn.functional as F
from minigrad import nn, optim
from minigrad.amp import GradScaler, GradScalerError


def _model():
    mg.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))


def _backward(model, scaler, x=None, t=None, amp=True):
    x = mg.randn(6, 4) if x is None else x
    t = mg.tensor([0, 1, 2, 0, 1, 2]) if t is None else t
    with mg.autocast(device_type="cpu", enabled=amp):
        loss = F.cross_entropy(model(x), t)
    scaler.scale(loss).backward()
    return loss


def _snapshot(model, opt):
    params = [p.detach().numpy().copy() for p in model.parameters()]
    state = [{k: (v.numpy().copy() if hasattr(v, "numpy") else v) for k, v in s.items()}
             for s in opt.state.values()]
    return params, state


def _assert_identical(a, b):
    (pa, sa), (pb, sb) = a, b
    assert len(pa) == len(pb) and all(x.tobytes() == y.tobytes() for x, y in zip(pa, pb))
    assert len(sa) == len(sb)
    for x, y in zip(sa, sb):
        assert x.keys() == y.keys()
        for k in x:
            assert np.asarray(x[k]).tobytes() == np.asarray(y[k]).tobytes(), k


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
@pytest.mark.parametrize("opt_cls", [lambda ps: optim.Adam(ps, lr=1e-2), lambda ps: optim.SGD(ps, 0.1, momentum=0.9),
                                     lambda ps: optim.RMSprop(ps, lr=1e-2)])
def test_inf_or_nan_in_one_gradient_skips_the_step_bit_identically_and_halves_the_scale(bad, opt_cls):
    model = _model()
    opt = opt_cls(model.parameters())
    scaler = GradScaler(init_scale=1024.0)
    _backward(model, scaler)                      # one clean step, so the optimizer has state
    scaler.step(opt)
    scaler.update()
    assert opt.state and scaler.get_scale() == 1024.0
    opt.zero_grad()
    before = _snapshot(model, opt)
    _backward(model, scaler)
    p = list(model.parameters())[2]
    p.grad.array[2, 5] = bad                        # one element of one gradient of one parameter
    assert scaler.step(opt) is None
    scaler.update()
    _assert_identical(before, _snapshot(model, opt))
    assert scaler.get_scale() == 512.0


def test_growth_after_growth_interval_clean_steps():
    model = _model()
    opt = optim.SGD(model.parameters(), lr=0.01)
    scaler = GradScaler(init_scale=4.0, growth_interval=3)
    scales = []
    for _ in range(7):
        opt.zero_grad()
        _backward(model, scaler)
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
    assert scales == [4.0, 4.0, 8.0, 8.0, 8.0, 16.0, 16.0]


def test_scripted_overflow_sequence_follows_pytorchs_documented_rule():
    """Rule (torch.amp.GradScaler docs): an inf/NaN step multiplies the scale by backoff_factor and resets
    the growth tracker; ``growth_interval`` consecutive clean steps multiply it by growth_factor."""
    overflow = [0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 1, 0]
    expected = [8, 8, 16, 8, 8, 8, 16, 16, 16, 32, 16, 8, 8]   # written out by hand from the rule
    model = _model()
    opt = optim.SGD(model.parameters(), lr=0.01)
    scaler = GradScaler(init_scale=8.0, growth_factor=2.0, backoff_factor=0.5, growth_interval=3)
    got = []
    for bad in overflow:
        opt.zero_grad()
        _backward(model, scaler)
        if bad:
            next(iter(model.parameters())).grad.array[0, 0] = np.inf
        scaler.step(opt)
        scaler.update()
        got.append(scaler.get_scale())
    assert got == expected
    assert scaler.state_dict()["_growth_tracker"] == 1


def test_step_returns_the_optimizer_result_and_none_when_skipped():
    class Counting(optim.SGD):
        def step(self, closure=None):
            super().step()
            return "stepped"
    model = _model()
    opt = Counting(model.parameters(), lr=0.1)
    scaler = GradScaler()
    _backward(model, scaler)
    assert scaler.step(opt) == "stepped"
    scaler.update()


def test_unscale_twice_and_step_twice_are_errors_and_closures_are_refused():
    model = _model()
    opt = optim.SGD(model.parameters(), lr=0.1)
    scaler = GradScaler()
    _backward(model, scaler)
    scaler.unscale_(opt)
    with pytest.raises(GradScalerError, match="unscale_\\(\\) has already been called"):
        scaler.unscale_(opt)
    scaler.step(opt)
    with pytest.raises(GradScalerError, match="step\\(\\) has already been called"):
        scaler.step(opt)
    with pytest.raises(GradScalerError, match="after step"):
        scaler.unscale_(opt)
    scaler.update()
    with pytest.raises(GradScalerError, match="Closure"):
        scaler.step(opt, closure=lambda: None)
    with pytest.raises(GradScalerError, match="no inf checks"):
        GradScaler().update()


def test_unscale_then_clip_sees_the_true_gradients():
    model = _model()
    x, t = mg.randn(6, 4), mg.tensor([0, 1, 2, 0, 1, 2])
    _backward(model, GradScaler(enabled=False), x, t)
    ref = [p.grad.numpy().copy() for p in model.parameters()]
    ref_norm = float(np.sqrt(sum((g.astype(np.float64) ** 2).sum() for g in ref)))
    model.zero_grad()
    opt = optim.SGD(model.parameters(), lr=0.1)
    scaler = GradScaler(init_scale=2.0 ** 12)
    _backward(model, scaler, x, t)
    scaler.unscale_(opt)
    norm = float(nn.utils.clip_grad_norm_(model.parameters(), 1e9))
    assert abs(norm - ref_norm) / ref_norm < 1e-5
    for p, g in zip(model.parameters(), ref):
        np.testing.assert_allclose(p.grad.numpy(), g, rtol=1e-5, atol=1e-7)  # same graph: float32 exact up to rounding


def test_gradient_accumulation_matches_float32_and_param_groups_all_skip():
    model = _model()
    ps = list(model.parameters())
    opt = optim.SGD([{"params": ps[:2], "lr": 0.1}, {"params": ps[2:], "lr": 0.01}])
    scaler = GradScaler(init_scale=256.0)
    xs = [mg.randn(6, 4) for _ in range(3)]
    for x in xs:
        _backward(model, scaler, x, amp=False)     # three micro-batches, one step
    scaler.unscale_(opt)
    acc = [p.grad.numpy().copy() for p in ps]
    model.zero_grad()
    for x in xs:
        _backward(model, GradScaler(enabled=False), x, amp=False)
    for a, p in zip(acc, ps):
        np.testing.assert_allclose(a, p.grad.numpy(), rtol=1e-5, atol=1e-7)
    # an inf in the *first* group skips the whole step, both groups untouched
    model.zero_grad()
    scaler = GradScaler()
    _backward(model, scaler)
    ps[0].grad.array[0, 0] = np.nan
    before = [p.detach().numpy().copy() for p in ps]
    assert scaler.step(opt) is None
    assert all((b == p.detach().numpy()).all() for b, p in zip(before, ps))


def test_two_optimizers_one_overflows_scale_backs_off_once():
    model = _model()
    ps = list(model.parameters())
    o1, o2 = optim.SGD(ps[:2], lr=0.1), optim.Adam(ps[2:], lr=0.1)
    scaler = GradScaler(init_scale=64.0)
    _backward(model, scaler)
    ps[3].grad.array[0] = np.inf
    before0 = ps[0].detach().numpy().copy()
    scaler.step(o1)                               # its own gradients are clean: it steps (checked below)
    assert scaler.step(o2) is None
    scaler.update()
    assert scaler.get_scale() == 32.0
    assert not (ps[0].detach().numpy() == before0).all()


def test_disabled_scaler_passes_through():
    model = _model()
    opt = optim.SGD(model.parameters(), lr=0.1)
    scaler = GradScaler(enabled=False)
    loss = _backward(model, scaler)
    assert scaler.scale(loss) is loss and scaler.get_scale() == 1.0
    scaler.step(opt)
    scaler.update()
    assert scaler.state_dict() == {}


def test_scale_lists_and_bad_arguments():
    s = GradScaler(init_scale=4.0)
    a, b = s.scale([mg.tensor(1.0), mg.tensor(2.0)])
    assert a.item() == 4.0 and b.item() == 8.0
    with pytest.raises(ValueError, match="growth_factor"):
        GradScaler(growth_factor=1.0)
    with pytest.raises(ValueError, match="backoff_factor"):
        GradScaler(backoff_factor=1.5)
    with pytest.raises(ValueError, match="growth_interval"):
        GradScaler(growth_interval=0)
    with pytest.raises(ValueError, match="GradScaler.scale"):
        s.scale(3.0)


def test_float16_gradients_are_refused_with_the_remedy():
    model = _model().half()
    opt = optim.SGD(model.parameters(), lr=0.1)
    scaler = GradScaler()
    loss = F.cross_entropy(model(mg.randn(6, 4).half()).float(), mg.tensor([0, 1, 2, 0, 1, 2]))
    scaler.scale(loss).backward()
    with pytest.raises(TypeError, match="master_weights"):
        scaler.step(opt)


def test_state_dict_round_trips_through_mg_save(tmp_path):
    s = GradScaler(init_scale=128.0, growth_interval=5)
    model = _model()
    opt = optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        _backward(model, s)
        s.step(opt)
        s.update()
    mg.save({"scaler": s.state_dict()}, tmp_path / "ckpt.mg")
    t = GradScaler()
    t.load_state_dict(mg.load(tmp_path / "ckpt.mg")["scaler"])
    assert t.state_dict() == s.state_dict() == {"scale": 128.0, "growth_factor": 2.0, "backoff_factor": 0.5,
                                                "growth_interval": 5, "_growth_tracker": 2}
    with pytest.raises(ValueError, match="empty"):
        GradScaler().load_state_dict({})


@pytest.mark.gpu
def test_on_the_emulated_cuda_device():
    if not mg.cuda.is_available():
        pytest.skip("no CUDA device (MINIGRAD_EMULATE_CUDA=1 runs the emulated one)")
    model = _model().to("cuda")
    opt = optim.Adam(model.parameters(), lr=1e-2)
    scaler = GradScaler(init_scale=16.0)
    x, t = mg.randn(6, 4, device="cuda"), mg.tensor([0, 1, 2, 0, 1, 2], device="cuda")
    with mg.autocast(device_type="cuda"):
        out = model(x)
        assert out.dtype == mg.float16
        loss = F.cross_entropy(out, t)
    scaler.scale(loss).backward()
    next(iter(model.parameters())).grad.array[0, 0] = np.nan
    assert scaler.step(opt) is None
    scaler.update()
    assert scaler.get_scale() == 8.0
