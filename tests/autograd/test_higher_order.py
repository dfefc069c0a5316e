"""create_graph=True (PyTorch's semantics), gradgradcheck, and what they are for: Hessian-vector products,
gradient penalties, differentiating through an optimizer step, Newton's method."""
import threading

import numpy as np
import pytest

import minigrad as mg
import minigrad.nn.functional as F
from minigrad.autograd import gradgradcheck
from minigrad.autograd.function import Function
from minigrad.autograd.higher_order import DoubleBackwardError
from minigrad.errors import GradcheckError


def leaf(values):
    return mg.tensor(np.asarray(values, dtype=np.float64), dtype=mg.float64, requires_grad=True)


def test_grad_returns_a_tuple_even_for_one_input():
    x = leaf([1.0, 2.0])
    out = mg.autograd.grad((x * x).sum(), x)
    assert isinstance(out, tuple) and len(out) == 1
    np.testing.assert_allclose(out[0].numpy(), [2.0, 4.0])


def test_create_graph_gives_a_differentiable_gradient():
    x = leaf([1.0, 2.0, 3.0])
    g, = mg.autograd.grad((x ** 3).sum(), x, create_graph=True)
    assert g.requires_grad and g.grad_fn is not None
    np.testing.assert_allclose(g.detach().numpy(), 3 * np.array([1.0, 4.0, 9.0]))
    h, = mg.autograd.grad(g.sum(), x, retain_graph=True)
    np.testing.assert_allclose(h.numpy(), [6.0, 12.0, 18.0])        # d2/dx2 x^3 = 6x
    third, = mg.autograd.grad(mg.autograd.grad(g.sum(), x, create_graph=True)[0].sum(), x)
    np.testing.assert_allclose(third.numpy(), [6.0, 6.0, 6.0])


def test_without_create_graph_the_gradient_is_a_constant():
    x = leaf([1.0, 2.0])
    g, = mg.autograd.grad((x ** 3).sum(), x)
    assert not g.requires_grad and g.grad_fn is None


def test_retain_graph_defaults_to_create_graph():
    x = leaf([1.0, 2.0])
    y = (x.exp() * x).sum()
    mg.autograd.grad(y, x, create_graph=True)
    g2, = mg.autograd.grad(y, x)                    # the graph was kept: a second pass works
    np.testing.assert_allclose(g2.numpy(), np.exp([1.0, 2.0]) * (1 + np.array([1.0, 2.0])))
    with pytest.raises(mg.errors.AutogradError, match="second time"):
        mg.autograd.grad(y, x)                      # ... and freed by that one (retain_graph=False)


def test_backward_create_graph_leaves_grad_with_grad_fn_and_accumulates_out_of_place():
    x = leaf([1.0, 2.0])
    (x ** 3).sum().backward(create_graph=True)
    assert x.grad.grad_fn is not None
    first = x.grad
    (x ** 2).sum().backward(create_graph=True)
    assert x.grad is not first                      # out of place: the first gradient's graph is intact
    np.testing.assert_allclose(x.grad.detach().numpy(), 3 * np.array([1.0, 4.0]) + 2 * np.array([1.0, 2.0]))
    gx, = mg.autograd.grad(x.grad.sum(), x)
    np.testing.assert_allclose(gx.numpy(), 6 * np.array([1.0, 2.0]) + 2)


def test_backward_inputs_accumulates_into_those_only():
    x, w = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    (x * w).sum().backward(inputs=[w])
    assert x.grad is None
    np.testing.assert_allclose(w.grad.numpy(), [1.0, 2.0])


def test_grad_outputs_with_a_graph_are_differentiated_too():
    x, v = leaf([1.0, 2.0]), leaf([0.5, -1.0])
    g, = mg.autograd.grad(x * x, x, grad_outputs=v, create_graph=True)     # 2 x v
    gv, = mg.autograd.grad(g.sum(), v)
    np.testing.assert_allclose(gv.numpy(), [2.0, 4.0])


def test_materialize_grads_and_allow_unused():
    x, u = leaf([1.0]), leaf([2.0])
    gx, gu = mg.autograd.grad((x * 2).sum(), [x, u], materialize_grads=True)
    np.testing.assert_allclose(gu.numpy(), [0.0])
    assert mg.autograd.grad((x * 2).sum(), [x, u], allow_unused=True)[1] is None


def test_the_same_tensor_twice_gets_both_partials():
    x = leaf([[0.3, -1.2], [2.0, 0.5]])
    assert gradgradcheck(lambda x: F.mse_loss(x, x * 0.5) + F.linear(x, x).sum(), (x,))


def test_tensor_hooks_see_graph_gradients():
    x = leaf([1.0, 2.0])
    y = x * x
    seen = []
    y.register_hook(lambda g: seen.append(g.requires_grad) or g * 2)
    g, = mg.autograd.grad(y.sum(), x, create_graph=True)
    assert seen == [False]                                    # the root gradient is ones: no graph
    np.testing.assert_allclose(g.detach().numpy(), [4.0, 8.0])
    assert g.requires_grad


def test_an_op_without_a_differentiable_backward_names_itself():
    class Cube(Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a ** 3

        @staticmethod
        def backward(ctx, grad):
            a, = ctx.saved_tensors
            return 3 * a * a * grad

    x = leaf([1.0, 2.0])
    g, = mg.autograd.grad(Cube.apply(x).sum(), x)            # first order is fine
    np.testing.assert_allclose(g.numpy(), [3.0, 12.0])
    with pytest.raises(DoubleBackwardError, match="cube: this op has no differentiable backward"):
        mg.autograd.grad(Cube.apply(x).sum(), x, create_graph=True)


def test_gradgradcheck_catches_a_wrong_second_derivative():
    class BadSquare(Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        def backward(ctx, grad):
            return 2 * ctx.saved_tensors[0] * grad

        @staticmethod
        def vjp(ctx, grad):
            a, = ctx.saved_tensors
            return 2 * a.detach() * grad                      # drops d/da: the second derivative is lost

    x = leaf([1.0, -2.0])
    assert mg.autograd.gradcheck(BadSquare.apply, (x,))
    with pytest.raises(GradcheckError, match="gradcheck failed for input 0"):
        gradgradcheck(BadSquare.apply, (x,))
    assert gradgradcheck(BadSquare.apply, (x,), raise_exception=False) is False


def test_embedding_padding_row_stays_frozen_at_second_order():
    w = leaf(np.arange(6.0).reshape(3, 2))
    idx = mg.tensor([[1, 0], [2, 0]])
    g, = mg.autograd.grad((F.embedding(idx, w, padding_idx=0) ** 2).sum(), w, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy()[0], [0.0, 0.0])
    h, = mg.autograd.grad(g.sum(), w)
    np.testing.assert_allclose(h.numpy(), [[0, 0], [2, 2], [2, 2]])


def _mlp(params, x):
    w1, b1, w2 = params
    return (F.tanh(x @ w1 + b1) @ w2).sum()


def test_hessian_vector_product_of_an_mlp_equals_finite_differences_of_the_gradient():
    rng = np.random.default_rng(0)
    params = [leaf(rng.standard_normal(s)) for s in ((3, 4), (4,), (4, 1))]
    x = mg.tensor(rng.standard_normal((5, 3)), dtype=mg.float64)
    v = [rng.standard_normal(p.shape) for p in params]
    grads = mg.autograd.grad(_mlp(params, x), params, create_graph=True)
    dot = sum((g * mg.tensor(vi, dtype=mg.float64)).sum() for g, vi in zip(grads, v))
    hvp = mg.autograd.grad(dot, params)
    eps = 1e-5

    def grad_at(shift):
        moved = [leaf(p.detach().numpy() + shift * vi) for p, vi in zip(params, v)]
        return [g.numpy() for g in mg.autograd.grad(_mlp(moved, x), moved)]
    numeric = [(a - b) / (2 * eps) for a, b in zip(grad_at(eps), grad_at(-eps))]
    for h, n in zip(hvp, numeric):
        np.testing.assert_allclose(h.numpy(), n, rtol=1e-6, atol=1e-8)


def test_a_gradient_penalty_trains():
    rng = np.random.default_rng(1)
    critic = mg.nn.Sequential(mg.nn.Linear(2, 8), mg.nn.Tanh(), mg.nn.Linear(8, 1)).double()
    opt = mg.optim.SGD(critic.parameters(), lr=0.05)
    x = mg.tensor(rng.standard_normal((16, 2)), dtype=mg.float64, requires_grad=True)

    def penalty():
        g, = mg.autograd.grad(critic(x).sum(), x, create_graph=True)
        return ((g.pow(2).sum(1).sqrt() - 1.0) ** 2).mean()
    first = penalty().item()
    for _ in range(60):
        opt.zero_grad()
        penalty().backward()          # through the gradient into the critic's weights
        opt.step()
    assert penalty().item() < 0.2 * first


def test_one_maml_inner_step_differentiates_through_sgd():
    w = leaf([0.5, -0.3])
    x, y = mg.tensor([[1.0, 2.0]], dtype=mg.float64), mg.tensor([1.0], dtype=mg.float64)
    loss = lambda w: ((x @ w - y) ** 2).sum()  # noqa: E731
    g, = mg.autograd.grad(loss(w), w, create_graph=True)
    outer = loss(w - 0.1 * g)
    meta, = mg.autograd.grad(outer, w)
    # by hand: L(w) = (x.w - y)^2, w' = w - 0.1 * 2 (x.w - y) x, dL(w')/dw = 2 (x.w' - y) x (1 - 0.2 |x|^2)
    xv, wv = np.array([1.0, 2.0]), np.array([0.5, -0.3])
    r = xv @ wv - 1.0
    w1 = wv - 0.2 * r * xv
    np.testing.assert_allclose(meta.numpy(), 2 * (xv @ w1 - 1.0) * xv * (1 - 0.2 * xv @ xv), rtol=1e-12)


def test_newton_converges_quadratically():
    a = mg.tensor([[3.0, 1.0], [1.0, 2.0]], dtype=mg.float64)
    f = lambda x: (x @ a @ x) * 0.5 + (x.exp()).sum()  # noqa: E731   strictly convex
    x = leaf([1.0, -1.0])
    errors = []
    for _ in range(6):
        g, = mg.autograd.grad(f(x), x, create_graph=True)
        rows = [mg.autograd.grad(g[i], x, retain_graph=True)[0].numpy() for i in range(2)]
        step = np.linalg.solve(np.array(rows), g.detach().numpy())
        x = leaf(x.detach().numpy() - step)
        errors.append(float(np.abs(g.detach().numpy()).max()))
    assert errors[-1] < 1e-12
    k = next(i for i, e in enumerate(errors) if e < 1e-2)
    assert errors[k + 1] < 10 * errors[k] ** 2       # quadratic: the error squares each step


def test_create_graph_in_two_threads():
    results = {}

    def work(name, scale):
        x = leaf([1.0, 2.0])
        g, = mg.autograd.grad((x ** 3).sum() * scale, x, create_graph=True)
        results[name] = mg.autograd.grad(g.sum(), x)[0].numpy()
    threads = [threading.Thread(target=work, args=(n, s)) for n, s in (("a", 1.0), ("b", 2.0))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    np.testing.assert_allclose(results["a"], [6.0, 12.0])
    np.testing.assert_allclose(results["b"], [12.0, 24.0])
