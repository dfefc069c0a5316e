"""``grad``, ``grad_and_value``, ``vjp``, ``jvp``, ``jacrev``, ``jacfwd``, ``hessian`` (torch.func's names and
semantics), written on ``autograd.grad`` and, for forward mode, ``autograd.forward_ad``.

How a transform differentiates: each input it differentiates gets a fresh graph node (a leaf that requires
grad, or, when the input already requires grad because an outer transform or the user differentiates
through it, a view of it, and then the gradient is computed with ``create_graph=True`` so the outer level
can differentiate it again). Inside ``vmap`` the inputs are first given every active batch dim, so the
gradient of each example is its own (per-example gradients: ``vmap(grad(loss), in_dims=(None, 0))``).

Reverse mode costs one backward pass per output element (``jacrev``: rows of the Jacobian), forward mode
one forward pass per input element (``jacfwd``: columns); the lecture times the crossover.
"""
import contextlib
import contextvars
import functools

from .. import autograd
from ..autograd import grad_mode
from ..errors import AutogradError
from .. import creation as _like
from ..ops import shape as _sh
from ..tensor import Tensor
from ._batched import BatchedTensor, VmapError, active_levels, active_sizes, physical_of, wrap
from ._tree import flatten, unflatten
from .vmap import to_levels


class ForwardOverReverseError(AutogradError):
    """jvp/jacfwd inside jvp/jacfwd: forward-mode (dual) levels do not nest."""


_depth = contextvars.ContextVar("minigrad.func.depth", default=0)   # reverse transforms running, per thread


@contextlib.contextmanager
def _running():
    """While a transform runs its function: an inner transform then keeps its gradient's graph, because
    the function may close over the outer transform's inputs (a gradient penalty, MAML)."""
    token = _depth.set(_depth.get() + 1)
    try:
        yield
    finally:
        _depth.reset(token)


# --- inputs: a node of their own to differentiate at ----------------------------------------------------
def _argnums(argnums, n, what):
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    if not nums:
        raise ValueError(f"{what}: argnums must name at least one argument")
    for a in nums:
        if not isinstance(a, int) or not -n <= a < n:
            raise ValueError(f"{what}: argnums {argnums!r} out of range for {n} positional arguments")
    return tuple(a % n for a in nums)


class _Inputs:
    """The differentiable versions of some arguments: ``values`` (what the function gets), ``physical``
    (what ``autograd.grad`` differentiates at), and whether an outer level needs a graph of the result."""

    def __init__(self, leaves, what):
        self.levels, sizes = active_levels(), active_sizes()
        self.values, self.physical, self.dual = [], [], False
        self.outer = _depth.get() > 0 and grad_mode.is_grad_enabled()
        for x in leaves:
            if not isinstance(x, Tensor) or x.dtype.name.startswith(("int", "uint", "bool")):
                raise TypeError(f"{what}: can only differentiate floating-point Tensors, got "
                                f"{x.dtype if isinstance(x, Tensor) else type(x).__name__}")
            p = to_levels(x, self.levels, sizes) if self.levels else x
            tangent = _tangent_of(x)
            if x.requires_grad and grad_mode.is_grad_enabled():
                self.outer = True          # keep the outer graph: differentiate at a view of x
                if p is x:
                    p = _sh.Transpose.apply(x, dim0=0, dim1=0) if x.ndim else _sh.Reshape.apply(x, shape=())
            else:
                p = physical_of(p).detach().requires_grad_(True)
                if tangent is not None:    # forward mode outside (jacfwd of jacrev): keep x's tangent
                    self.outer = self.dual = True
                    p = _forward_ad().make_dual(p, tangent)
            self.physical.append(p)
            self.values.append(wrap(p, self.levels))

    def grads(self, outputs, cotangents, what):
        """d(outputs)/d(inputs) against ``cotangents`` (physical, one per output), zeros where unused."""
        outs, cts = [], []
        for y, v in zip(outputs, cotangents):
            if y.requires_grad:
                outs.append(y)
                cts.append(v)
        if not outs:
            gs = [None] * len(self.physical)
        else:
            with grad_mode.enable_grad():
                gs = _autograd_grad(outs, self.physical, cts, self.outer, what)
        if self.dual and any(g is not None and g.requires_grad and _tangent_of(g) is None for g in gs):
            gs = self._with_tangents(gs, what)
        res = []
        for p, g in zip(self.physical, gs):
            g = _like.zeros_like(p) if g is None else g
            if not self.outer:
                g = g.detach()
            res.append(wrap(g, self.levels))
        return res


    def _with_tangents(self, gs, what):
        """Forward over reverse (``jvp(grad(f))``, ``jacfwd(jacrev(f))``) where the tangents did not go
        through the backward graph: each gradient's tangent, the JVP of the gradient along the inputs'
        tangents, by the double-vjp trick (two more reverse passes), attached with ``make_dual``."""
        fwd = _forward_ad()
        pairs = [(p, t) for p, t in ((p, _tangent_of(p)) for p in self.physical) if t is not None]
        live = [i for i, g in enumerate(gs) if g is not None and g.requires_grad]
        ws = [_like.zeros_like(gs[i]).requires_grad_(True) for i in live]
        with grad_mode.enable_grad():
            s = _autograd_grad([gs[i] for i in live], [p for p, _ in pairs], ws, True, what)
            used = [(si, t) for si, (_, t) in zip(s, pairs) if si is not None and si.requires_grad]
            tans = _autograd_grad([si for si, _ in used], ws, [t for _, t in used], False, what) if used else \
                [None] * len(ws)
        out = list(gs)
        for i, w, t in zip(live, ws, tans):
            out[i] = fwd.make_dual(gs[i], _like.zeros_like(w) if t is None else t.detach())
        return out


def _tangent_of(x):
    """``x``'s forward-mode tangent at the dual level in force, or None."""
    fwd = _forward_ad()
    return None if fwd is None or isinstance(x, BatchedTensor) else fwd.unpack_dual(x).tangent


def _autograd_grad(outputs, inputs, cotangents, create_graph, what):
    kw = {"create_graph": True} if create_graph else {}
    try:
        gs = autograd.grad(tuple(outputs), tuple(inputs), tuple(cotangents), retain_graph=True,
                           allow_unused=True, **kw)
    except TypeError as e:
        if create_graph and "create_graph" in str(e):
            raise AutogradError(f"{what}: differentiating a gradient needs autograd.grad(create_graph=True), "
                                f"which this minigrad does not have") from None
        raise
    return gs if isinstance(gs, tuple) else (gs,)


def _physical_output(y, levels, what):
    if not isinstance(y, Tensor):
        raise TypeError(f"{what}: the function must return Tensors, got {type(y).__name__}")
    if isinstance(y, BatchedTensor) and not set(y.levels) <= set(levels):
        raise VmapError(f"{what}: the output is batched at a vmap level the inputs are not in")
    return y


def _cotangent(y, v, levels, what):
    """The physical cotangent of output ``y`` for the logical cotangent ``v`` (broadcast over the batch)."""
    if tuple(v.shape) != tuple(y.shape):
        raise ValueError(f"{what}: cotangent of shape {tuple(v.shape)} for an output of shape {tuple(y.shape)}")
    if isinstance(v, BatchedTensor) and not set(v.levels) <= set(y.levels if isinstance(y, BatchedTensor)
                                                                  else ()):
        raise VmapError(f"{what}: a cotangent batched by a vmap the function did not run in is not supported "
                        f"(call vjp inside that vmap)")
    ylv = y.levels if isinstance(y, BatchedTensor) else ()
    return to_levels(v, ylv, active_sizes()) if ylv else physical_of(v)


def _split_aux(out, has_aux, what):
    if not has_aux:
        return out, None
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise ValueError(f"{what}(has_aux=True): the function must return a pair (output, aux)")
    return out[0], out[1]


def _detached(tree, keep):
    if keep:
        return tree
    leaves, spec = flatten(tree)
    return unflatten(spec, [t.detach() if isinstance(t, Tensor) else t for t in leaves])


# --- vjp, grad ------------------------------------------------------------------------------------------
def vjp(func, *primals, has_aux=False):
    """``(output, vjp_fn)`` (``+ aux``): ``vjp_fn(cotangents)`` returns one gradient per primal, the
    cotangent-weighted gradient of the output; it can be called several times."""
    leaves, spec = flatten(primals)
    ins = _Inputs(leaves, "vjp")
    with _running():
        out, aux = _split_aux(func(*unflatten(spec, ins.values)), has_aux, "vjp")
    outs, ospec = flatten(out)
    outs = [_physical_output(y, ins.levels, "vjp") for y in outs]

    def vjp_fn(cotangents):
        cts, cspec = flatten(cotangents)
        if len(cts) != len(outs):
            raise ValueError(f"vjp_fn: expected {len(outs)} cotangents (one per output), got {len(cts)}")
        phys = [_cotangent(y, v, ins.levels, "vjp_fn") for y, v in zip(outs, cts)]
        gs = ins.grads([physical_of(y) for y in outs], phys, "vjp_fn")
        return tuple(unflatten(spec, gs))

    res = (_detached(out, ins.outer), vjp_fn)
    return res + (_detached(aux, ins.outer),) if has_aux else res


def grad_and_value(func, argnums=0, has_aux=False):
    """``grad_and_value(f)(*args) -> (gradient, value)``; with ``has_aux``, ``(gradient, (value, aux))``.
    ``f`` returns a one-element tensor; ``argnums`` (int or tuple) picks what to differentiate."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        nums = _argnums(argnums, len(args), "grad")
        picked = [args[i] for i in nums]
        leaves, spec = flatten(picked)
        ins = _Inputs(leaves, "grad")
        new = list(args)
        for i, v in zip(nums, unflatten(spec, ins.values)):
            new[i] = v
        with _running():
            out, aux = _split_aux(func(*new, **kwargs), has_aux, "grad")
        y = _physical_output(out, ins.levels, "grad")
        if y.numel() != 1:
            raise ValueError(f"grad: the function must return a one-element tensor, got shape {tuple(y.shape)}"
                             f" (use vjp or jacrev for other outputs)")
        py = physical_of(y)
        gs = unflatten(spec, ins.grads([py], [_like.ones_like(py)], "grad"))
        g = gs[0] if isinstance(argnums, int) else tuple(gs)
        value = _detached(out, ins.outer)
        return (g, (value, _detached(aux, ins.outer))) if has_aux else (g, value)
    return wrapper


def grad(func, argnums=0, has_aux=False):
    """``grad(f)(*args)``: the gradient of the one-element output of ``f`` with respect to ``args[argnums]``
    (a tuple of gradients for a tuple of argnums); with ``has_aux``, ``(gradient, aux)``."""
    gv = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        g, value = gv(*args, **kwargs)
        return (g, value[1]) if has_aux else g
    return wrapper


# --- jvp: forward mode ----------------------------------------------------------------------------------
def _forward_ad():
    return getattr(autograd, "forward_ad", None)


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """``(output, jvp_out)`` (``+ aux``): the output and its directional derivative along ``tangents``
    (one per primal, same shapes). Forward mode (``autograd.forward_ad``) when minigrad has it, else the
    double-vjp trick (two reverse passes)."""
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("jvp: primals and tangents must be tuples (one entry per argument of func)")
    pl, pspec = flatten(tuple(primals))
    tl, _ = flatten(tuple(tangents))
    if len(pl) != len(tl):
        raise ValueError(f"jvp: {len(pl)} primals but {len(tl)} tangents")
    for p, t in zip(pl, tl):
        if tuple(p.shape) != tuple(t.shape):
            raise ValueError(f"jvp: tangent of shape {tuple(t.shape)} for a primal of shape {tuple(p.shape)}")
    res = _in_dual_level(lambda fwd: _jvp_in_level(fwd, func, pl, pspec, tl, has_aux))
    return _jvp_by_double_vjp(func, pl, pspec, tl, has_aux) if res is None else res


def _in_dual_level(run):
    """``run(forward_ad)`` in a dual level of its own; None where forward mode can't be used (no
    forward_ad, inside vmap, or an op without a JVP rule: the caller then uses two reverse passes)."""
    fwd = _forward_ad()
    if fwd is None or active_levels():
        return None
    try:
        with fwd.dual_level():
            return run(fwd)
    except fwd.ForwardADError as e:
        if "nested" in str(e):
            raise ForwardOverReverseError(
                "jvp/jacfwd inside jvp/jacfwd: forward-mode levels do not nest in minigrad (one dual level at a "
                "time, as torch.autograd.forward_ad); use jacfwd(jacrev(f)) or hessian(f)") from None
        if "no forward-mode rule" not in str(e):
            raise
        return None


def _jvp_in_level(fwd, func, pl, pspec, tl, has_aux):
    keep = grad_mode.is_grad_enabled() and (_depth.get() > 0 or any(t.requires_grad for t in pl + list(tl)))
    duals = [fwd.make_dual(p, t) for p, t in zip(pl, tl)]
    out, aux = _split_aux(func(*unflatten(pspec, duals)), has_aux, "jvp")
    outs, ospec = flatten(out)
    prim, tang = [], []
    for y in outs:
        pt = fwd.unpack_dual(y)
        t = _like.zeros_like(pt.primal) if pt.tangent is None else pt.tangent
        prim.append(pt.primal if keep else pt.primal.detach())
        tang.append(t if keep else t.detach())   # differentiable only for an outer differentiation
    res = (unflatten(ospec, prim), unflatten(ospec, tang))
    return res + (aux,) if has_aux else res


def _columns(func, prims, basis_of, has_aux):
    """jvp along each tangent ``basis_of`` yields: forward mode in one dual level for all of them (entering
    a level registers a wrapper: once, not once per column); two reverse passes each where an op has no
    JVP rule. Returns [(output, tangent output[, aux])]."""
    pl, pspec = flatten(tuple(prims))
    res = _in_dual_level(lambda fwd: [_jvp_in_level(fwd, func, pl, pspec, flatten(tuple(t))[0], has_aux)
                                      for t in basis_of()])
    return [jvp(func, tuple(prims), tuple(t), has_aux=has_aux) for t in basis_of()] if res is None else res


def _jvp_by_double_vjp(func, pl, pspec, tl, has_aux):
    """J t as the gradient of u -> <J^T u, t> with respect to u: two reverse passes, the first with
    ``create_graph=True`` (what jvp does without forward mode: inside vmap, or through an op without a
    JVP rule). Works on the physical tensors, so it batches under vmap."""
    ins = _Inputs(pl, "jvp")
    with _running():
        out, aux = _split_aux(func(*unflatten(pspec, ins.values)), has_aux, "jvp")
    outs, ospec = flatten(out)
    outs = [_physical_output(y, ins.levels, "jvp") for y in outs]
    phys = [physical_of(y) for y in outs]
    us = [_like.zeros_like(p).requires_grad_(True) for p in phys]
    sizes = active_sizes()
    ts = [to_levels(t, ins.levels, sizes) if ins.levels else physical_of(t) for t in tl]
    with grad_mode.enable_grad():
        live = [(p, u) for p, u in zip(phys, us) if p.requires_grad]
        gs = _autograd_grad([p for p, _ in live], ins.physical, [u for _, u in live], True, "jvp") if live \
            else [None] * len(ts)
        pairs = [(g, t) for g, t in zip(gs, ts) if g is not None and g.requires_grad]
        tang = _autograd_grad([g for g, _ in pairs], us, [t for _, t in pairs], ins.outer, "jvp") if pairs \
            else [None] * len(us)
    res_t = []
    for y, p, t in zip(outs, phys, tang):
        t = _like.zeros_like(p) if t is None else t
        res_t.append(wrap(t if ins.outer else t.detach(), y.levels if isinstance(y, BatchedTensor) else ()))
    res = (_detached(out, ins.outer), unflatten(ospec, res_t))
    return res + (_detached(aux, ins.outer),) if has_aux else res


# --- Jacobians, Hessian ---------------------------------------------------------------------------------
def _basis(t):
    """The rows of the identity, one tensor of ``t``'s shape per element (cheap views of one eye)."""
    n = t.numel()
    eye = _like.eye(n, dtype=t.dtype, device=t.device).reshape((n,) + tuple(t.shape))
    return [eye[i] for i in range(n)]


def _stack_jac(rows, out_shape, in_shape, out_major):
    """Rows (or columns) of a Jacobian stacked into ``out_shape + in_shape``."""
    n = len(rows)
    if n == 0:
        return None
    st = _sh.stack(rows, 0)
    if out_major:     # rows[i]: d out[i] / d in, shape in_shape
        return st.reshape(tuple(out_shape) + tuple(in_shape))
    perm = tuple(range(1, st.ndim)) + (0,)     # cols[j]: d out / d in[j], shape out_shape
    return st.permute(*perm).reshape(tuple(out_shape) + tuple(in_shape))


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None):
    """The Jacobian of ``func`` with respect to ``args[argnums]`` by reverse mode: one backward pass per
    output element. Shape ``output.shape + input.shape``; tuples of outputs/argnums give nested tuples."""
    @functools.wraps(func)
    def wrapper(*args):
        nums = _argnums(argnums, len(args), "jacrev")

        def picked(*xs):
            new = list(args)
            for i, x in zip(nums, xs):
                new[i] = x
            return func(*new)
        res = vjp(picked, *[args[i] for i in nums], has_aux=has_aux)
        out, vjp_fn = res[0], res[1]
        outs, ospec = flatten(out)
        per_out = []
        for k, y in enumerate(outs):
            rows = [[] for _ in nums]
            for e in _basis(y):
                cts = [e if j == k else _like.zeros_like(o) for j, o in enumerate(outs)]
                gs = vjp_fn(unflatten(ospec, cts))
                for r, g in zip(rows, gs):
                    r.append(g)
            jac = [_stack_jac(r, y.shape, args[i].shape, True) if r else
                   _like.zeros_like(args[i]).reshape(tuple(y.shape) + tuple(args[i].shape))
                   for r, i in zip(rows, nums)]
            per_out.append(jac[0] if isinstance(argnums, int) else tuple(jac))
        jac = unflatten(ospec, per_out)
        return (jac, res[2]) if has_aux else jac
    return wrapper


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """The Jacobian by forward mode: one jvp per input element (columns). Same shapes as ``jacrev``."""
    @functools.wraps(func)
    def wrapper(*args):
        nums = _argnums(argnums, len(args), "jacfwd")
        prims = [args[i] for i in nums]

        def picked(*xs):
            new = list(args)
            for i, x in zip(nums, xs):
                new[i] = x
            return func(*new)

        def basis():
            for a, x in enumerate(prims):
                for e in _basis(x):
                    yield [e if b == a else _like.zeros_like(p) for b, p in enumerate(prims)]
        results = _columns(picked, prims, basis, has_aux)
        if not results:
            results = [jvp(picked, tuple(prims), tuple(_like.zeros_like(p) for p in prims), has_aux=has_aux)]
            cols = [[] for _ in nums]
        else:
            sizes = [x.numel() for x in prims]
            starts = [sum(sizes[:a]) for a in range(len(prims))]
            cols = [[flatten(r[1])[0] for r in results[s:s + n]] for s, n in zip(starts, sizes)]
        out = results[0][0]
        aux = results[0][2] if has_aux else None
        outs, ospec = flatten(out)
        per_out = []
        for k, y in enumerate(outs):
            jac = [_stack_jac([c[k] for c in cols[a]], y.shape, prims[a].shape, False) if cols[a] else
                   _like.zeros_like(y).reshape(tuple(y.shape) + tuple(prims[a].shape))
                   for a in range(len(nums))]
            per_out.append(jac[0] if isinstance(argnums, int) else tuple(jac))
        jac = unflatten(ospec, per_out)
        return (jac, aux) if has_aux else jac
    return wrapper


def hessian(func, argnums=0):
    """The Hessian of a one-element output: ``jacfwd(jacrev(func, argnums), argnums)``, as torch.func
    (forward over reverse: one forward pass per input element). Inside another forward-mode transform
    (dual levels do not nest), the same matrix by reverse over reverse."""
    fwd_over_rev, rev_over_rev = jacfwd(jacrev(func, argnums), argnums), jacrev(jacrev(func, argnums), argnums)
    fallback = []   # set once forward over reverse failed for this function: later calls go straight on

    @functools.wraps(func)
    def wrapper(*args):
        if not fallback:
            try:
                return fwd_over_rev(*args)
            except ForwardOverReverseError:
                fallback.append(True)
        return rev_over_rev(*args)
    return wrapper
