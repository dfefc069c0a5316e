"""L-BFGS, as PyTorch's ``torch.optim.LBFGS`` (itself after minFunc): a quasi-Newton method that keeps the
last ``history_size`` steps s = x_{k+1} - x_k and gradient changes y = g_{k+1} - g_k and applies the
inverse-Hessian approximation they define to the gradient with the two-loop recursion::

    q = -g;  for i newest..oldest: a_i = rho_i s_i.q,  q -= a_i y_i          rho_i = 1 / (y_i.s_i)
    r = H0 q (H0 = y.s / y.y of the newest pair)
    for i oldest..newest: b = rho_i y_i.r,  r += (a_i - b) s_i               d = r: the search direction

``step(closure)`` runs up to ``max_iter`` such iterations, each re-evaluating the loss through
``closure`` (which must zero the gradients, compute the loss, call backward and return it), with a fixed
step ``lr`` (the first scaled by 1 / |g|_1) or a strong-Wolfe line search (``line_search_fn='strong_wolfe'``).
All parameters form one flat vector, so there is one parameter group and no per-parameter options.
"""
from ..autograd.grad_mode import enable_grad, no_grad
from ..backend.device import get_backend
from ..errors import ArgumentError
from ..tensor import Tensor
from .optimizer import Optimizer


def _cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimiser of the cubic through (x1, f1, g1) and (x2, f2, g2), clamped to ``bounds``."""
    lo, hi = bounds if bounds is not None else ((x1, x2) if x1 <= x2 else (x2, x1))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 ** 2 - g1 * g2
    if d2_square >= 0:
        d2 = d2_square ** 0.5
        if x1 <= x2:
            pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(pos, lo), hi)
    return (lo + hi) / 2.0


def _strong_wolfe(evaluate, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    """Find t satisfying the strong Wolfe conditions along d (bracketing, then zoom by cubic
    interpolation). ``evaluate(x, t, d) -> (loss, flat grad)``; returns (f_new, g_new, t, evaluations)."""
    xp_dot = lambda a, b: float((a * b).sum())  # noqa: E731
    d_norm = float(abs(d).max())
    f_new, g_new = evaluate(x, t, d)
    ls_evals = 1
    gtd_new = xp_dot(g_new, d)
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done, ls_iter = False, 0
    while ls_iter < max_ls:                                  # bracketing phase
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            bracket, bracket_f, bracket_g, bracket_gtd = [t_prev, t], [f_prev, f_new], [g_prev, g_new.copy()], \
                [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g, done = [t], [f_new], [g_new], True
            break
        if gtd_new >= 0:
            bracket, bracket_f, bracket_g, bracket_gtd = [t_prev, t], [f_prev, f_new], [g_prev, g_new.copy()], \
                [gtd_prev, gtd_new]
            break
        min_step, max_step = t + 0.01 * (t - t_prev), t * 10
        tmp = t
        t = _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(min_step, max_step))
        t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new.copy(), gtd_new
        f_new, g_new = evaluate(x, t, d)
        ls_evals += 1
        gtd_new = xp_dot(g_new, d)
        ls_iter += 1
    if ls_iter == max_ls:
        bracket, bracket_f, bracket_g = [0, t], [f, f_new], [g, g_new]
    insuf_progress = False
    low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:                     # zoom phase
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1])
        eps = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < eps:    # too close to a boundary: move away
            if insuf_progress or t >= max(bracket) or t <= min(bracket):
                t = max(bracket) - eps if abs(t - max(bracket)) < abs(t - min(bracket)) else min(bracket) + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False
        f_new, g_new = evaluate(x, t, d)
        ls_evals += 1
        gtd_new = xp_dot(g_new, d)
        ls_iter += 1
        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low_pos]:
            bracket[high_pos], bracket_f[high_pos], bracket_g[high_pos] = t, f_new, g_new.copy()
            bracket_gtd[high_pos] = gtd_new
            low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high_pos] - bracket[low_pos]) >= 0:
                bracket[high_pos], bracket_f[high_pos] = bracket[low_pos], bracket_f[low_pos]
                bracket_g[high_pos], bracket_gtd[high_pos] = bracket_g[low_pos], bracket_gtd[low_pos]
            bracket[low_pos], bracket_f[low_pos], bracket_g[low_pos] = t, f_new, g_new.copy()
            bracket_gtd[low_pos] = gtd_new
    return bracket_f[low_pos], bracket_g[low_pos], bracket[low_pos], ls_evals


class LBFGS(Optimizer):
    """L-BFGS. Defaults: lr=1, max_iter=20, max_eval=max_iter * 5 // 4, tolerance_grad=1e-7,
    tolerance_change=1e-9, history_size=100, line_search_fn=None (or 'strong_wolfe').
    ``step(closure)`` needs the closure; it returns the loss of the first evaluation."""

    def __init__(self, params, lr=1.0, max_iter=20, max_eval=None, tolerance_grad=1e-7, tolerance_change=1e-9,
                 history_size=100, line_search_fn=None):
        if lr < 0.0:
            raise ArgumentError(f"Invalid learning rate: {lr}")
        if line_search_fn not in (None, "strong_wolfe"):
            raise ArgumentError(f"LBFGS: line_search_fn must be None or 'strong_wolfe', got {line_search_fn!r}")
        max_eval = max_iter * 5 // 4 if max_eval is None else max_eval
        defaults = dict(lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
                        tolerance_change=tolerance_change, history_size=history_size, line_search_fn=line_search_fn)
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ArgumentError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    # --- the parameters as one flat vector -----------------------------------------------------------
    def _xp(self):
        return get_backend(self._params[0].device).xp

    def _flat_grad(self):
        xp = self._xp()
        return xp.concatenate([(p.grad.array if p.grad is not None else xp.zeros(p.array.shape, p.array.dtype))
                               .reshape(-1) for p in self._params])

    def _add(self, step, d):
        """x += step * d, parameter by parameter (in place: optimizers hold the same objects)."""
        offset = 0
        for p in self._params:
            n = p.array.size
            p.array += (step * d[offset:offset + n]).reshape(p.array.shape).astype(p.array.dtype, copy=False)
            p._version_counter.bump()
            offset += n

    def _snapshot(self):
        return [p.array.copy() for p in self._params]

    def _restore(self, saved):
        for p, a in zip(self._params, saved):
            p.array[...] = a
            p._version_counter.bump()

    def step(self, closure=None):
        if closure is None:
            raise ArgumentError("LBFGS.step needs a closure that zeroes the gradients, computes the loss, calls "
                                "backward() and returns the loss")
        with no_grad():
            return self._step(closure)

    def _evaluate(self, closure):
        with enable_grad():
            return float(closure())

    def _step(self, closure):
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        history_size, line_search_fn = group["history_size"], group["line_search_fn"]
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        with enable_grad():
            orig_loss = closure()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        opt_cond = float(abs(flat_grad).max()) <= tolerance_grad
        if opt_cond:
            return orig_loss
        arr = lambda name: None if state.get(name) is None else state[name].array  # noqa: E731
        d, t, H_diag = arr("d"), state.get("t"), state.get("H_diag")
        old_dirs = [v.array for v in state.get("old_dirs", [])]
        old_stps = [v.array for v in state.get("old_stps", [])]
        ro = list(state.get("ro", []))
        prev_flat_grad, prev_loss = arr("prev_flat_grad"), state.get("prev_loss")
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:                          # steepest descent to start
                d, old_dirs, old_stps, ro, H_diag = -flat_grad, [], [], [], 1.0
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = float((y * s).sum())
                if ys > 1e-10:                                # curvature condition: keep the pair
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0), old_stps.pop(0), ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / float((y * y).sum())
                al = [0.0] * len(old_dirs)
                q = -flat_grad
                for i in range(len(old_dirs) - 1, -1, -1):    # the two-loop recursion
                    al[i] = float((old_stps[i] * q).sum()) * ro[i]
                    q = q - al[i] * old_dirs[i]
                d = r = q * H_diag
                for i in range(len(old_dirs)):
                    be_i = float((old_dirs[i] * r).sum()) * ro[i]
                    r += (al[i] - be_i) * old_stps[i]
            prev_flat_grad = flat_grad.copy()
            prev_loss = loss
            t = min(1.0, 1.0 / float(abs(flat_grad).sum())) * lr if state["n_iter"] == 1 else lr
            gtd = float((flat_grad * d).sum())
            if gtd > -tolerance_change:                       # not a descent direction
                break
            ls_func_evals = 0
            if line_search_fn is not None:
                x0 = self._snapshot()

                def evaluate(x, step, direction):
                    self._add(step, direction)
                    value = self._evaluate(closure)
                    grad = self._flat_grad()
                    self._restore(x)
                    return value, grad
                loss, flat_grad, t, ls_func_evals = _strong_wolfe(evaluate, x0, t, d, loss, flat_grad, gtd)
                self._add(t, d)
                opt_cond = float(abs(flat_grad).max()) <= tolerance_grad
            else:
                self._add(t, d)
                if n_iter != max_iter:                        # re-evaluate, except after the last iteration
                    loss = self._evaluate(closure)
                    flat_grad = self._flat_grad()
                    opt_cond = float(abs(flat_grad).max()) <= tolerance_grad
                    ls_func_evals = 1
            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals
            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if float(abs(d * t).max()) <= tolerance_change or abs(loss - prev_loss) < tolerance_change:
                break
        dev = self._params[0].device
        wrap = lambda a: Tensor._make(a, dev)  # noqa: E731
        state.update(d=wrap(d), t=t, old_dirs=[wrap(v) for v in old_dirs], old_stps=[wrap(v) for v in old_stps],
                     ro=ro, H_diag=H_diag, prev_flat_grad=wrap(prev_flat_grad), prev_loss=prev_loss)
        return orig_loss
