"""L-BFGS: its first step is a scaled gradient step, it solves a convex quadratic, it finds Rosenbrock's
minimum with the strong-Wolfe line search, and it keeps PyTorch's closure protocol and limits."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import nn, optim
from minigrad.errors import ArgumentError


def _quadratic(n=6, seed=0):
    rng = np.random.default_rng(seed)
    m = rng.standard_normal((n, n))
    return m @ m.T + n * np.eye(n), rng.standard_normal(n)


@pytest.mark.parametrize("line_search", [None, "strong_wolfe"])
def test_solves_a_convex_quadratic(line_search, device):
    A, b = _quadratic()
    x = nn.Parameter(mg.zeros(6, dtype=mg.float64, device=device))
    At, bt = mg.tensor(A, device=device), mg.tensor(b, device=device)
    opt = optim.LBFGS([x], lr=1.0 if line_search else 0.5, max_iter=100, line_search_fn=line_search,
                      tolerance_grad=1e-12, tolerance_change=1e-15)

    def closure():
        opt.zero_grad()
        loss = 0.5 * (x @ (At @ x)) - bt @ x
        loss.backward()
        return loss
    for _ in range(3):
        opt.step(closure)
    np.testing.assert_allclose(x.detach().numpy(), np.linalg.solve(A, b), rtol=1e-5, atol=1e-6)


def test_first_iteration_is_a_scaled_steepest_descent_step():
    x = nn.Parameter(mg.tensor([3.0, -4.0], dtype=mg.float64))
    opt = optim.LBFGS([x], lr=0.5, max_iter=1)

    def closure():
        opt.zero_grad()
        loss = (x * x).sum()
        loss.backward()
        return loss
    loss = opt.step(closure)
    g = np.array([6.0, -8.0])
    np.testing.assert_allclose(x.detach().numpy(), [3.0, -4.0] - 0.5 * min(1.0, 1.0 / 14.0) * g)
    assert float(loss) == 25.0 and opt.state[x]["func_evals"] == 1 and opt.state[x]["n_iter"] == 1


def test_rosenbrock_with_strong_wolfe():
    xy = nn.Parameter(mg.tensor([-1.5, 2.0], dtype=mg.float64))
    opt = optim.LBFGS([xy], lr=1.0, max_iter=200, line_search_fn="strong_wolfe", tolerance_grad=1e-10,
                      tolerance_change=1e-14)

    def closure():
        opt.zero_grad()
        x, y = xy[0], xy[1]
        loss = (1 - x) ** 2 + 100 * (y - x * x) ** 2
        loss.backward()
        return loss
    opt.step(closure)
    np.testing.assert_allclose(xy.detach().numpy(), [1.0, 1.0], atol=1e-6)
    assert opt.state[xy]["func_evals"] < 200


def test_closure_and_groups_are_required_as_in_pytorch():
    p = nn.Parameter(mg.zeros(2))
    with pytest.raises(ArgumentError, match="closure"):
        optim.LBFGS([p]).step()
    with pytest.raises(ArgumentError, match="per-parameter options"):
        optim.LBFGS([{"params": [p]}, {"params": [nn.Parameter(mg.zeros(1))]}])
    with pytest.raises(ArgumentError, match="strong_wolfe"):
        optim.LBFGS([p], line_search_fn="backtracking")
