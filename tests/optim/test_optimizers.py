"""SGD, Adam, AdamW, RMSprop and Adadelta against written-out NumPy loops of PyTorch's update formulas (float64,
several steps, param groups with different learning rates and options)."""
import math

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn, optim


# --- reference loops (plain NumPy, no in-place tricks) --------------------------------------------
def ref_sgd(p, grads, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=False):
    buf = None
    for g in grads:
        d = -g if maximize else g
        if weight_decay:
            d = d + weight_decay * p
        if momentum:
            buf = d.copy() if buf is None else momentum * buf + (1 - dampening) * d
            d = d + momentum * buf if nesterov else buf
        p = p - lr * d
    return p


def ref_adam(p, grads, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, maximize=False,
             decoupled=False):
    b1, b2 = betas
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    vmax = np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        g = -g if maximize else g
        if decoupled:
            p = p * (1 - lr * weight_decay)
        elif weight_decay:
            g = g + weight_decay * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        if amsgrad:
            vmax = np.maximum(vmax, v)
            vhat = vmax
        else:
            vhat = v
        denom = np.sqrt(vhat) / math.sqrt(1 - b2 ** t) + eps
        p = p - lr / (1 - b1 ** t) * m / denom
    return p


def ref_rmsprop(p, grads, lr, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False,
                maximize=False):
    s = np.zeros_like(p)
    ga = np.zeros_like(p)
    buf = np.zeros_like(p)
    for g in grads:
        g = -g if maximize else g
        if weight_decay:
            g = g + weight_decay * p
        s = alpha * s + (1 - alpha) * g * g
        if centered:
            ga = alpha * ga + (1 - alpha) * g
            avg = np.sqrt(s - ga * ga) + eps
        else:
            avg = np.sqrt(s) + eps
        if momentum > 0:
            buf = momentum * buf + g / avg
            p = p - lr * buf
        else:
            p = p - lr * g / avg
    return p


def ref_adadelta(p, grads, lr, rho=0.9, eps=1e-6, weight_decay=0.0, maximize=False):
    v = np.zeros_like(p)
    u = np.zeros_like(p)
    for g in grads:
        g = -g if maximize else g
        if weight_decay:
            g = g + weight_decay * p
        v = rho * v + (1 - rho) * g * g
        delta = np.sqrt(u + eps) / np.sqrt(v + eps) * g
        u = rho * u + (1 - rho) * delta * delta
        p = p - lr * delta
    return p


REFS = {optim.SGD: ref_sgd, optim.Adadelta: ref_adadelta, optim.Adam: ref_adam, optim.RMSprop: ref_rmsprop,
        optim.AdamW: lambda p, g, lr, weight_decay=1e-2, **kw: ref_adam(p, g, lr, weight_decay=weight_decay,
                                                                        decoupled=True, **kw)}

CASES = [
    (optim.SGD, dict()),
    (optim.SGD, dict(momentum=0.9)),
    (optim.SGD, dict(momentum=0.9, dampening=0.3)),
    (optim.SGD, dict(momentum=0.8, nesterov=True)),
    (optim.SGD, dict(momentum=0.9, weight_decay=0.1)),
    (optim.SGD, dict(momentum=0.9, nesterov=True, weight_decay=0.05, maximize=True)),
    (optim.SGD, dict(weight_decay=0.1, maximize=True)),
    (optim.Adam, dict()),
    (optim.Adam, dict(betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)),
    (optim.Adam, dict(amsgrad=True)),
    (optim.Adam, dict(maximize=True, weight_decay=0.01)),
    (optim.AdamW, dict()),
    (optim.AdamW, dict(weight_decay=0.3, amsgrad=True)),
    (optim.RMSprop, dict()),
    (optim.RMSprop, dict(centered=True)),
    (optim.RMSprop, dict(momentum=0.9)),
    (optim.RMSprop, dict(momentum=0.5, centered=True, weight_decay=0.1, alpha=0.9)),
    (optim.RMSprop, dict(maximize=True)),
    (optim.Adadelta, dict()),
    (optim.Adadelta, dict(rho=0.5, eps=1e-3, weight_decay=0.1, maximize=True)),
]


def _make_grads(shapes, steps, seed=0):
    rng = np.random.default_rng(seed)
    return [[rng.standard_normal(s) for _ in range(steps)] for s in shapes]


@pytest.mark.parametrize("cls,kw", CASES, ids=lambda v: v.__name__ if isinstance(v, type) else str(v))
def test_update_formula_matches_reference_with_param_groups(cls, kw, device):
    rng = np.random.default_rng(1)
    shapes = [(3, 4), (5,), (2, 3)]
    init = [rng.standard_normal(s) for s in shapes]
    params = [nn.Parameter(mg.tensor(a, device=device)) for a in init]
    lrs = [0.1, 0.1, 0.02]
    opt = cls([{"params": params[:2]}, {"params": params[2:], "lr": lrs[2]}], lr=lrs[0], **kw)
    steps = 5
    grads = _make_grads(shapes, steps)
    for t in range(steps):
        for p, g in zip(params, grads):
            p.grad = mg.tensor(g[t], device=device)
        opt.step()
    for p, a, g, lr in zip(params, init, grads, lrs):
        expected = REFS[cls](a.copy(), g, lr, **kw)
        np.testing.assert_allclose(p.detach().numpy(), expected, rtol=1e-12, atol=1e-14)
        assert p.device == device
        assert all(v.device == device for v in opt.state[p].values() if isinstance(v, mg.Tensor))


def test_group_options_override_defaults_and_are_filled_in():
    a, b = nn.Parameter(mg.zeros(2)), nn.Parameter(mg.zeros(2))
    opt = optim.SGD([{"params": [a], "momentum": 0.5}, {"params": [b]}], lr=0.1)
    assert opt.param_groups[0]["momentum"] == 0.5 and opt.param_groups[1]["momentum"] == 0.0
    assert opt.param_groups[1]["lr"] == 0.1 and opt.param_groups[0]["nesterov"] is False
    c = nn.Parameter(mg.zeros(1))
    opt.add_param_group({"params": c, "lr": 0.5})
    assert len(opt.param_groups[2]["params"]) == 1 and opt.param_groups[2]["params"][0] is c
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [a]})
    with pytest.raises(TypeError, match="ordered collections"):
        optim.SGD({a, b})
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.SGD([])
    with pytest.raises(ValueError, match="non-leaf"):
        optim.SGD([a * 2])
    with pytest.raises(ValueError):
        optim.SGD([a], lr=-1)
    with pytest.raises(ValueError, match="Nesterov"):
        optim.SGD([a], nesterov=True)
    with pytest.raises(ValueError):
        optim.Adam([a], betas=(1.0, 0.9))


def test_step_skips_params_without_grad_and_bumps_versions(device):
    a, b = nn.Parameter(mg.ones(2, device=device)), nn.Parameter(mg.ones(2, device=device))
    opt = optim.Adam([a, b], lr=0.1)
    a.grad = mg.ones(2, device=device)
    va, vb = a._version, b._version
    opt.step()
    assert a._version > va and b._version == vb
    np.testing.assert_array_equal(b.detach().numpy(), [1, 1])
    assert b not in opt.state or not opt.state[b]
    assert opt.state[a]["step"] == 1


def test_zero_grad_to_none_or_zeros(device):
    a = nn.Parameter(mg.ones(3, device=device))
    opt = optim.SGD([a], lr=0.1)
    (a * 2).sum().backward()
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(a.grad.numpy(), [0, 0, 0])
    (a * 2).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [2, 2, 2])
    opt.zero_grad()
    assert a.grad is None


def test_closure_is_evaluated_with_grad_enabled(device):
    w = nn.Parameter(mg.tensor([3.0], dtype=mg.float64, device=device))
    opt = optim.SGD([w], lr=0.25)

    def closure():
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        return loss
    with mg.no_grad():
        loss = opt.step(closure)
    assert loss.item() == 9.0
    np.testing.assert_allclose(w.detach().numpy(), [3.0 - 0.25 * 6.0])


def test_training_a_model_end_to_end_decreases_the_loss(device):
    mg.manual_seed(0)
    x = mg.randn(64, 3, dtype=mg.float64, device=device)
    y = x @ mg.tensor([[1.0], [-2.0], [0.5]], dtype=mg.float64, device=device) + 0.3
    for cls, kw in [(optim.SGD, dict(lr=0.1, momentum=0.9)), (optim.Adam, dict(lr=0.05)),
                    (optim.AdamW, dict(lr=0.05)), (optim.RMSprop, dict(lr=0.01))]:
        model = nn.Linear(3, 1, device=device).double()
        opt = cls(model.parameters(), **kw)
        first = None
        for _ in range(100):
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            first = loss.item() if first is None else first
        assert loss.item() < 0.05 * first, cls.__name__


def test_optimizer_keeps_working_after_module_double(device):
    model = nn.Linear(2, 1, device=device)
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model.double()
    model(mg.ones(1, 2, dtype=mg.float64, device=device)).sum().backward()
    opt.step()
    assert model.weight.dtype == mg.float64
    assert opt.state[model.weight]["momentum_buffer"].dtype == mg.float64
    assert opt.state[model.weight]["momentum_buffer"].device == device


def test_float32_updates_stay_float32(device):
    for cls in (optim.SGD, optim.Adam, optim.AdamW, optim.RMSprop):
        p = nn.Parameter(mg.ones(4, device=device))
        opt = cls([p], lr=0.1, **({"momentum": 0.9} if cls in (optim.SGD, optim.RMSprop) else {}))
        for _ in range(2):
            p.grad = mg.ones(4, device=device)
            opt.step()
        assert p.dtype == mg.float32 and p.array.dtype == np.float32
        for v in opt.state[p].values():
            if isinstance(v, mg.Tensor):
                assert v.dtype == mg.float32


def test_update_functions_are_standalone_kernels():
    """The per-optimizer update functions run on raw arrays (the seam for fused GPU kernels)."""
    p = np.ones(3)
    g = np.full(3, 2.0)
    buf = optim.sgd_update(np, p, g, None, 0.1, 0.9, 0.0, False, 0.0, False)
    np.testing.assert_allclose(p, 1 - 0.1 * 2)
    np.testing.assert_allclose(buf, g)
    assert buf is not g
    np.testing.assert_array_equal(g, 2.0)  # the gradient is never modified
    assert optim.SGD.kernels["default"] is optim.sgd_update
    assert optim.Adam.kernels["default"] is optim.adam_update
    assert optim.RMSprop.kernels["default"] is optim.rmsprop_update


def test_repr():
    opt = optim.SGD([nn.Parameter(mg.zeros(1))], lr=0.5)
    assert repr(opt).startswith("SGD (\nParameter Group 0\n") and "lr: 0.5" in repr(opt)


@pytest.mark.parametrize("cls,kw", [(optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
                                    (optim.Adam, dict(lr=0.1, amsgrad=True)), (optim.AdamW, dict(lr=0.1)),
                                    (optim.RMSprop, dict(lr=0.1, momentum=0.5, centered=True))])
def test_step_on_device_matches_cpu(device, cls, kw):
    rng = np.random.default_rng(0)
    init = rng.standard_normal((4, 3))
    grads = [rng.standard_normal((4, 3)) for _ in range(3)]
    results = []
    for dev in ("cpu", device):
        p = nn.Parameter(mg.tensor(init, device=dev))
        opt = cls([p], **kw)
        for g in grads:
            p.grad = mg.tensor(g, device=dev)
            opt.step()
        assert p.device == mg.device(dev)
        assert all(v.device == p.device for v in opt.state[p].values() if isinstance(v, mg.Tensor))
        results.append(p.detach().cpu().numpy())
    np.testing.assert_allclose(results[1], results[0], rtol=1e-12, atol=1e-14)
