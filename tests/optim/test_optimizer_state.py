"""Optimizer state_dict / load_state_dict: PyTorch's layout, resuming reproduces an uninterrupted run."""
import copy

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn, optim


def _model(device="cpu"):
    mg.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).double().to(device)


def _train(model, opt, steps, seed):
    rng = np.random.default_rng(seed)
    device = next(model.parameters()).device
    for _ in range(steps):
        x = mg.tensor(rng.standard_normal((8, 3)), device=device)
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()


def _groups(model, **kw):
    return [{"params": list(model[0].parameters())}, {"params": list(model[2].parameters()), "lr": 0.01, **kw}]


@pytest.mark.parametrize("cls,kw", [(optim.SGD, dict(lr=0.1, momentum=0.9)), (optim.Adam, dict(lr=0.01, amsgrad=True)),
                                    (optim.AdamW, dict(lr=0.01)),
                                    (optim.RMSprop, dict(lr=0.01, momentum=0.5, centered=True)),
                                    (optim.Adadelta, dict(lr=0.5, weight_decay=0.01))])
def test_resume_matches_uninterrupted_training(cls, kw, device):
    ref = _model(device)
    ref_opt = cls(_groups(ref), **kw)
    _train(ref, ref_opt, 3, seed=1)
    _train(ref, ref_opt, 3, seed=2)

    model = _model(device)
    opt = cls(_groups(model), **kw)
    _train(model, opt, 3, seed=1)
    model_sd = {k: v.clone() for k, v in model.state_dict().items()}
    opt_sd = copy.deepcopy(opt.state_dict())

    resumed = _model(device)
    resumed.load_state_dict(model_sd)
    new_opt = cls(_groups(resumed), lr=123.0)          # hyper-parameters come from the state dict
    new_opt.load_state_dict(opt_sd)
    assert new_opt.param_groups[1]["lr"] == 0.01 and new_opt.param_groups[0]["lr"] == kw["lr"]
    _train(resumed, new_opt, 3, seed=2)
    assert all(v.device == device for st in new_opt.state.values() for v in st.values() if isinstance(v, mg.Tensor))
    for (n, a), b in zip(ref.state_dict().items(), resumed.state_dict().values()):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-13, atol=1e-15, err_msg=n)


def test_state_dict_layout_like_pytorch(device):
    model = _model(device)
    opt = optim.Adam(_groups(model), lr=0.1)
    _train(model, opt, 2, seed=0)
    sd = opt.state_dict()
    assert set(sd) == {"state", "param_groups"}
    assert [g["params"] for g in sd["param_groups"]] == [[0, 1], [2, 3]]
    assert sd["param_groups"][1]["lr"] == 0.01 and sd["param_groups"][0]["betas"] == (0.9, 0.999)
    assert sorted(sd["state"]) == [0, 1, 2, 3]
    st = sd["state"][2]
    assert st["step"] == 2 and isinstance(st["exp_avg"], mg.Tensor) and st["exp_avg"].shape == (2, 4)
    # every value is a tensor or a plain number / tuple / bool: what mg.save stores
    for g in sd["param_groups"]:
        for v in g.values():
            assert isinstance(v, (int, float, bool, tuple, list))


def test_load_state_dict_copies_and_casts_state(device):
    """State saved on the cpu is copied (and cast) onto the device and dtype of the new parameters."""
    model = _model()
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    _train(model, opt, 1, seed=0)
    sd = opt.state_dict()
    model32 = _model(device).float()
    opt32 = optim.SGD(model32.parameters(), lr=0.1, momentum=0.9)
    opt32.load_state_dict(sd)
    buf = opt32.state[model32[0].weight]["momentum_buffer"]
    assert buf.dtype == mg.float32 and buf.device == device
    opt64 = optim.SGD(_model(device).parameters(), lr=0.1, momentum=0.9)
    opt64.load_state_dict(sd)
    src = sd["state"][0]["momentum_buffer"]
    dst = opt64.state[opt64.param_groups[0]["params"][0]]["momentum_buffer"]
    assert dst.array is not src.array and dst.device == device
    np.testing.assert_array_equal(dst.numpy(), src.numpy())


def test_load_state_dict_rejects_mismatched_groups():
    model = _model()
    opt = optim.SGD(_groups(model), lr=0.1)
    sd = opt.state_dict()
    with pytest.raises(ValueError, match="number of parameter groups"):
        optim.SGD(model.parameters(), lr=0.1).load_state_dict(sd)
    other = optim.SGD([{"params": list(model[0].parameters())[:1]}, {"params": list(model[2].parameters())}],
                      lr=0.1)
    with pytest.raises(ValueError, match="doesn't match the size"):
        other.load_state_dict(sd)
