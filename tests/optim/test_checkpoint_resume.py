"""A full training checkpoint (model, optimizer, scheduler) through mg.save / mg.load resumes exactly."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import nn, optim
from minigrad.optim import lr_scheduler as S

pytestmark = pytest.mark.skipif(not hasattr(mg, "save"), reason="mg.save / mg.load not available")


def _setup(sched_kind, device):
    mg.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 8), nn.BatchNorm1d(8), nn.GELU(), nn.Linear(8, 2)).double().to(device)
    opt = optim.AdamW([{"params": list(model[0].parameters())},
                       {"params": list(model[1].parameters()) + list(model[3].parameters()), "lr": 0.01}],
                      lr=0.05, amsgrad=True)
    if sched_kind == "warmup_cosine":
        sched = S.warmup_cosine(opt, warmup_steps=2, total_steps=10, min_lr=1e-4)
    elif sched_kind == "multistep":
        sched = S.MultiStepLR(opt, milestones=[3, 5, 5], gamma=0.5)
    else:
        sched = S.OneCycleLR(opt, max_lr=0.1, total_steps=10)
    return model, opt, sched


def _train(model, opt, sched, steps, seed):
    rng = np.random.default_rng(seed)
    device = next(model.parameters()).device
    for _ in range(steps):
        x = mg.tensor(rng.standard_normal((16, 3)), device=device)
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
        sched.step()


@pytest.mark.parametrize("sched_kind", ["warmup_cosine", "multistep", "onecycle"])
def test_checkpoint_round_trip_resumes_exactly(tmp_path, sched_kind, device):
    ref = _setup(sched_kind, device)
    _train(*ref, 4, seed=1)
    _train(*ref, 4, seed=2)

    model, opt, sched = _setup(sched_kind, device)
    _train(model, opt, sched, 4, seed=1)
    path = tmp_path / "ckpt.npz"
    mg.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
             "step": 4}, path)

    model2, opt2, sched2 = _setup(sched_kind, device)
    ckpt = mg.load(path)
    model2.load_state_dict(ckpt["model"])
    opt2.load_state_dict(ckpt["optimizer"])
    sched2.load_state_dict(ckpt["scheduler"])
    assert ckpt["step"] == 4
    _train(model2, opt2, sched2, 4, seed=2)
    assert all(v.device == device for v in model2.state_dict().values())
    assert all(v.device == device for st in opt2.state.values() for v in st.values() if isinstance(v, mg.Tensor))
    for (name, a), b in zip(ref[0].state_dict().items(), model2.state_dict().values()):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-13, atol=1e-15, err_msg=name)
    assert sched2.get_last_lr() == pytest.approx(ref[2].get_last_lr())
    assert opt2.param_groups[1]["lr"] == pytest.approx(ref[1].param_groups[1]["lr"])
