"""grad, grad_and_value, vjp, jvp, jacrev, jacfwd, hessian against float64 central differences, with
torch.func's calling conventions (argnums, has_aux, tuples), and real uses (HVP, Newton, per-example)."""
import numpy as np
import pytest

import minigrad as mg
from minigrad.func import grad, grad_and_value, hessian, jacfwd, jacrev, jvp, vjp, vmap

D = mg.float64


def t(a):
    return mg.tensor(np.asarray(a, dtype=np.float64))


def rnd(*shape, seed=0):
    return t(np.random.default_rng(seed).standard_normal(shape))


def num_jac(f, x, eps=1e-6):
    """Central differences of f (array -> array) at x: shape f(x).shape + x.shape."""
    x = np.asarray(x, dtype=np.float64)
    y0 = np.asarray(f(x))
    J = np.zeros(y0.shape + x.shape)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        J[(Ellipsis,) + i] = (np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * eps)
    return J


W = np.random.default_rng(1).standard_normal((4, 3))


def f_vec(x):          # R^3 -> R^4, smooth
    return (t(W) @ x).exp() * x.sum() + (x ** 3).sum()


def f_np(x):
    return np.exp(W @ x) * x.sum() + (x ** 3).sum()


def f_scalar(x):
    return ((t(W) @ x).exp() ** 2).sum() + (x ** 4).sum()


def f_scalar_np(x):
    return (np.exp(W @ x) ** 2).sum() + (x ** 4).sum()


def test_grad_matches_central_differences():
    x = rnd(3)
    np.testing.assert_allclose(grad(f_scalar)(x).numpy(), num_jac(f_scalar_np, x.numpy()), rtol=1e-6)


def test_grad_argnums_has_aux_and_grad_and_value_structure():
    x, y = rnd(3), rnd(3, seed=2)

    def f(x, y):
        v = (x * y.exp()).sum()
        return v, {"v2": v * 2}
    gx, gy = grad(f, argnums=(0, 1), has_aux=True)(x, y)[0]
    np.testing.assert_allclose(gx.numpy(), np.exp(y.numpy()))
    np.testing.assert_allclose(gy.numpy(), x.numpy() * np.exp(y.numpy()))
    g, (value, aux) = grad_and_value(f, argnums=1, has_aux=True)(x, y)
    np.testing.assert_allclose(value.numpy(), (x.numpy() * np.exp(y.numpy())).sum())
    np.testing.assert_allclose(aux["v2"].numpy(), 2 * value.numpy())
    assert not value.requires_grad and not g.requires_grad
    with pytest.raises(ValueError, match="one-element"):
        grad(lambda x: x * 2)(x)


def test_vjp_several_outputs_called_twice():
    x = rnd(3)
    out, fn = vjp(lambda x: (f_vec(x), x.sin()), x)
    u1, u2 = rnd(4, seed=3), rnd(3, seed=4)
    J = num_jac(f_np, x.numpy())
    for _ in range(2):
        g, = fn((u1, u2))
        np.testing.assert_allclose(g.numpy(), u1.numpy() @ J + u2.numpy() * np.cos(x.numpy()), rtol=1e-6)


def test_jvp_matches_central_differences():
    x, v = rnd(3), rnd(3, seed=5)
    out, tan = jvp(f_vec, (x,), (v,))
    np.testing.assert_allclose(out.numpy(), f_np(x.numpy()))
    np.testing.assert_allclose(tan.numpy(), num_jac(f_np, x.numpy()) @ v.numpy(), rtol=1e-6)


def test_jvp_by_two_reverse_passes_matches_forward_mode():
    """What jvp does where an op has no forward-mode rule: J v from two vjps (the double-vjp trick)."""
    from minigrad.func._tree import flatten
    from minigrad.func.transforms import _jvp_by_double_vjp
    x, v = rnd(3), rnd(3, seed=5)
    leaves, spec = flatten((x,))
    out, tan = _jvp_by_double_vjp(f_vec, leaves, spec, [v], False)
    np.testing.assert_allclose(tan.numpy(), jvp(f_vec, (x,), (v,))[1].numpy(), rtol=1e-12)
    np.testing.assert_allclose(tan.numpy(), num_jac(f_np, x.numpy()) @ v.numpy(), rtol=1e-6)


@pytest.mark.parametrize("jac", [jacrev, jacfwd])
def test_jacobians_match_central_differences(jac):
    x = rnd(3)
    np.testing.assert_allclose(jac(f_vec)(x).numpy(), num_jac(f_np, x.numpy()), rtol=1e-6)
    A = rnd(2, 3)
    J = jac(lambda a, x: (a @ x).exp(), argnums=(0, 1))(A, x)
    np.testing.assert_allclose(J[0].numpy(), num_jac(lambda a: np.exp(a @ x.numpy()), A.numpy()), rtol=1e-6)
    np.testing.assert_allclose(J[1].numpy(), num_jac(lambda z: np.exp(A.numpy() @ z), x.numpy()), rtol=1e-6)


def test_hessian_and_nested_transforms_match_central_differences():
    x = rnd(3)
    H = num_jac(lambda z: num_jac(f_scalar_np, z), x.numpy(), eps=1e-4)
    for h in (hessian(f_scalar), jacrev(jacrev(f_scalar)), jacrev(jacfwd(f_scalar))):
        np.testing.assert_allclose(h(x).numpy(), H, rtol=1e-4, atol=1e-5)
    g2 = grad(lambda z: grad(lambda y: (y ** 3).sum())(z).sum())(x)   # d/dx sum(3x^2) = 6x
    np.testing.assert_allclose(g2.numpy(), 6 * x.numpy())


def mlp_loss(params, x, y):
    w1, b1, w2 = params
    h = (x @ w1 + b1).exp() / ((x @ w1 + b1).exp() + 1.0)       # a sigmoid from primitives
    return ((h @ w2 - y) ** 2).mean()


def test_hvp_of_a_small_mlp_equals_finite_differences_of_its_gradient():
    rng = np.random.default_rng(7)
    params = (t(rng.standard_normal((3, 5))), t(rng.standard_normal(5)), t(rng.standard_normal((5, 1))))
    x, y = t(rng.standard_normal((8, 3))), t(rng.standard_normal((8, 1)))
    vs = tuple(t(rng.standard_normal(p.shape)) for p in params)
    g = grad(mlp_loss)
    _, hvp_fn = vjp(lambda *p: g(p, x, y), *params)     # reverse over reverse: O(one gradient)
    hvp = hvp_fn(vs)                                    # H v = H^T v
    _, hvp_fwd = jvp(lambda *p: g(p, x, y), params, vs)  # forward over reverse: the same vector
    for a, b in zip(hvp, hvp_fwd):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-12)
    eps = 1e-5
    plus = g(tuple(p + eps * v for p, v in zip(params, vs)), x, y)
    minus = g(tuple(p - eps * v for p, v in zip(params, vs)), x, y)
    for h, gp, gm in zip(hvp, plus, minus):
        np.testing.assert_allclose(h.numpy(), (gp.numpy() - gm.numpy()) / (2 * eps), rtol=1e-5, atol=1e-8)


def test_newton_converges_quadratically_on_a_convex_problem():
    """Logistic-regression-like objective: the error roughly squares at each step."""
    rng = np.random.default_rng(3)
    A, b = t(rng.standard_normal((20, 3))), t(rng.standard_normal(20))

    def f(w):
        z = A @ w
        return ((1.0 + z.exp()).log() - b * z).mean() + 0.05 * (w ** 2).sum()
    w = t(np.zeros(3))
    norms = []
    for _ in range(6):
        g, H = grad(f)(w), hessian(f)(w)
        norms.append(float(np.linalg.norm(g.numpy())))
        w = w - t(np.linalg.solve(H.numpy(), g.numpy()))
    assert norms[-1] < 1e-12
    k = next(i for i, n in enumerate(norms) if n < 1e-2)
    assert norms[k + 1] < 10 * norms[k] ** 2       # quadratic: the digits double


def test_per_example_gradients_of_an_mlp_with_vmap():
    rng = np.random.default_rng(8)
    params = (t(rng.standard_normal((3, 5))), t(rng.standard_normal(5)), t(rng.standard_normal((5, 1))))
    x, y = t(rng.standard_normal((6, 3))), t(rng.standard_normal((6, 1)))
    pe = vmap(grad(lambda p, x, y: mlp_loss(p, x[None], y[None])), in_dims=(None, 0, 0))(params, x, y)
    for i in range(6):
        gi = grad(mlp_loss)(params, x[i:i + 1], y[i:i + 1])
        for a, b in zip(pe, gi):
            np.testing.assert_allclose(a.numpy()[i], b.numpy(), rtol=1e-10)
    J = vmap(jacrev(lambda x: (t(W) @ x).exp()))(rnd(5, 3))
    assert tuple(J.shape) == (5, 4, 3)


def test_transforms_of_a_tensor_that_requires_grad_stay_differentiable():
    x = rnd(3).requires_grad_()
    g = grad(lambda z: (z ** 3).sum())(x)       # 3x^2, itself a function of x
    assert g.requires_grad
    g.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 6 * x.detach().numpy())


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="argnums"):
        grad(lambda x: x.sum(), argnums=2)(rnd(2))
    with pytest.raises(TypeError, match="floating"):
        grad(lambda x: x.sum())(mg.tensor([1, 2]))
    with pytest.raises(ValueError, match="tangent of shape"):
        jvp(lambda x: x, (rnd(2),), (rnd(3),))
    with pytest.raises(ValueError, match="pair"):
        grad(lambda x: x.sum(), has_aux=True)(rnd(2))


def test_maml_inner_step_differentiates_through_the_sgd_update():
    """theta' = theta - a grad L_train(theta); d L_val(theta') / d theta vs central differences."""
    rng = np.random.default_rng(11)
    Xa, Ya, Xb, Yb = (t(rng.standard_normal(s)) for s in ((6, 3), (6,), (5, 3), (5,)))

    def L(w, X, Y):
        return (((X @ w).tanh() - Y) ** 2).mean()

    def outer(w):
        return L(w - 0.5 * grad(L)(w, Xa, Ya), Xb, Yb)
    w = rnd(3, seed=12)

    def outer_np(w_):
        return float(outer(t(w_)).numpy())
    np.testing.assert_allclose(grad(outer)(w).numpy(), num_jac(outer_np, w.numpy(), eps=1e-5), rtol=1e-6)


def test_a_wgan_gp_style_gradient_penalty_trains():
    """A critic trained on (|grad_x D(x)| - 1)^2 alone: the penalty falls, and its gradient is exact."""
    rng = np.random.default_rng(13)
    X = t(rng.standard_normal((16, 2)))
    W, a = t(rng.standard_normal((2, 8)) * 2), t(rng.standard_normal(8))

    def penalty(W, a):
        def critic_sum(x):
            return ((x @ W).tanh() @ a).sum()
        gx = grad(critic_sum)(X)
        return ((gx.pow(2).sum(1).sqrt() - 1.0) ** 2).mean()
    gW = grad(penalty)(W, a)
    np.testing.assert_allclose(gW.numpy(), num_jac(lambda w_: float(penalty(t(w_), a).numpy()), W.numpy(), 1e-5),
                               rtol=1e-5, atol=1e-8)
    start = float(penalty(W, a).numpy())
    for _ in range(30):
        gW, ga = grad(penalty, argnums=(0, 1))(W, a)
        W, a = W - 0.2 * gW, a - 0.2 * ga
    assert float(penalty(W, a).numpy()) < 0.2 * start


def test_forward_mode_levels_do_not_nest_and_say_so():
    from minigrad.func.transforms import ForwardOverReverseError
    with pytest.raises(ForwardOverReverseError, match="do not nest"):
        jacfwd(jacfwd(f_scalar))(rnd(3))
