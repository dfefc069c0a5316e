"""Matrix products: matmul (1-D, 2-D, batched, with broadcast batch dims: NumPy/PyTorch rules), einsum, and
the products composed from them (addmm, baddbmm, outer, diag, diagonal)."""
import string
from collections import Counter

import numpy as np  # shape arithmetic only

from ..autograd.function import Function
from ..errors import ArgumentError, ShapeError
from ..tensor_base import TensorBase as Tensor  # every Tensor is one (tensor.py imports ops)
from ._args import as_tensor_like, norm_dim
from ._rules import const, tsum
from ..backend import gemm
from .shape import pad


def _mT(x):
    return x.swapaxes(-1, -2)


class MatMul(Function):
    name = "matmul"

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return gemm.matmul(ctx.xp, a, b)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        need_a, need_b = ctx.needs_input_grad
        a_vec, b_vec = a.ndim == 1, b.ndim == 1
        if a_vec and b_vec:  # dot product
            return (grad * b if need_a else None), (grad * a if need_b else None)
        # promote vectors to matrices so one set of formulas serves every case
        a2 = a[None, :] if a_vec else a
        b2 = b[:, None] if b_vec else b
        g = grad
        if a_vec:
            g = g[..., None, :]
        if b_vec:
            g = g[..., None]
        ga = gb = None
        if need_a:
            ga = gemm.matmul(ctx.xp, g, _mT(b2))
            if a_vec:
                ga = ga.reshape(-1, a.shape[0]).sum(0) if ga.ndim > 2 else ga[0]
        if need_b:
            if b2.ndim == 2 and a2.ndim > 2:
                # (…, n, k) @ (k, m): fold the batch into one GEMM instead of summing per batch
                k, m = b2.shape
                gb = gemm.matmul(ctx.xp, a2.reshape(-1, k).T, g.reshape(-1, m))
            else:
                gb = gemm.matmul(ctx.xp, _mT(a2), g)
            if b_vec:
                gb = gb[..., 0]
        return ga, gb

    @staticmethod
    def vjp(ctx, grad):
        a, b = ctx.saved_tensors
        need_a, need_b = ctx.needs_input_grad
        if a.ndim == 1 and b.ndim == 1:
            return (grad * b if need_a else None), (grad * a if need_b else None)
        a2 = a.unsqueeze(0) if a.ndim == 1 else a
        b2 = b.unsqueeze(-1) if b.ndim == 1 else b
        g = grad.unsqueeze(-2) if a.ndim == 1 else grad
        g = g.unsqueeze(-1) if b.ndim == 1 else g
        ga = matmul(g, _mT(b2)) if need_a else None     # batch dims: the engine sums them back
        gb = matmul(_mT(a2), g) if need_b else None
        if ga is not None and a.ndim == 1:
            ga = ga[..., 0, :]
        if gb is not None and b.ndim == 1:
            gb = gb[..., 0]
        return ga, gb

    @staticmethod
    def jvp(primals, tangents, out):
        (a, b), (ta, tb) = primals, tangents
        return tsum(None if ta is None else matmul(ta, b), None if tb is None else matmul(a, tb))


def matmul(a, b):
    if not isinstance(b, Tensor):
        b = as_tensor_like(b, a)
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(f"matmul: both arguments need at least 1 dimension, got shapes "
                         f"{tuple(a.shape)} and {tuple(b.shape)}")
    k_a = a.shape[-1]
    k_b = b.shape[0] if b.ndim == 1 else b.shape[-2]
    if k_a != k_b:
        raise ShapeError(f"matmul: shapes {tuple(a.shape)} and {tuple(b.shape)} are not aligned "
                         f"({k_a} != {k_b})")
    if a.ndim > 2 or b.ndim > 2:
        try:
            np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        except ValueError:
            raise ShapeError(f"matmul: batch dims of shapes {tuple(a.shape)} and {tuple(b.shape)} do not "
                             f"broadcast ({tuple(a.shape[:-2])} vs {tuple(b.shape[:-2])})") from None
    return MatMul.apply(a, b)


def _check_ndim(op, a, b, ndim):
    if a.ndim != ndim or b.ndim != ndim:
        raise ShapeError(f"{op}: expected {ndim}-D tensors, got shapes {tuple(a.shape)} and {tuple(b.shape)}")


def mm(a, b):
    _check_ndim("mm", a, b, 2)
    return matmul(a, b)


def bmm(a, b):
    _check_ndim("bmm", a, b, 3)
    return matmul(a, b)


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """beta * input + alpha * (mat1 @ mat2); with beta = 0, ``input`` is ignored (NaNs in it too)."""
    return _scaled_sum(input, mm(mat1, mat2), beta, alpha)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * bmm(batch1, batch2), batch by batch."""
    return _scaled_sum(input, bmm(batch1, batch2), beta, alpha)


def _scaled_sum(input, prod, beta, alpha):
    prod = prod if alpha == 1 else prod * alpha
    if beta == 0:
        return prod
    return prod + (input if beta == 1 else input * beta)


def outer(input, vec2):
    """The outer product of two 1-D tensors: (n,), (m,) -> (n, m)."""
    if input.ndim != 1 or vec2.ndim != 1:
        raise ShapeError(f"outer: expected two 1-D tensors, got shapes {tuple(input.shape)} and "
                         f"{tuple(vec2.shape)}")
    return input.unsqueeze(1) * vec2.unsqueeze(0)


ger = outer


def diagonal(input, offset=0, dim1=0, dim2=1):
    """The diagonal of dims ``dim1``, ``dim2`` (``offset`` > 0: above the main one) as the last dim; an
    advanced-index read, so its gradient scatters back into zeros."""
    if input.ndim < 2:
        raise ShapeError(f"diagonal: needs at least 2 dims, got shape {tuple(input.shape)}")
    d1, d2 = norm_dim(dim1, input.ndim, "diagonal"), norm_dim(dim2, input.ndim, "diagonal")
    if d1 == d2:
        raise ArgumentError(f"diagonal: dim1 and dim2 are the same dim ({dim1}, {dim2})")
    rest = [d for d in range(input.ndim) if d not in (d1, d2)]
    x = input.permute(*rest, d1, d2)
    n1, n2 = x.shape[-2:]
    n = max(0, min(n1 + min(offset, 0), n2 - max(offset, 0)))
    rows = np.arange(n) - min(offset, 0)
    return x[(Ellipsis, rows, rows + offset)]


def diag(input, diagonal=0):
    """1-D -> a square matrix with ``input`` on diagonal ``diagonal``; 2-D -> that diagonal as a 1-D tensor."""
    if input.ndim == 2:
        return globals()["diagonal"](input, diagonal)
    if input.ndim != 1:
        raise ShapeError(f"diag: expected a 1-D or 2-D tensor, got shape {tuple(input.shape)}")
    k = abs(diagonal)
    square = const(input, input.device.xp.eye(input.shape[0], dtype=input.array.dtype)) * input
    # the (n, n) diagonal moved to offset k: pad k columns left and k rows below (k > 0), or the reverse
    return pad(square, (k, 0, 0, k) if diagonal >= 0 else (0, k, k, 0))


def trace(input):
    """The sum of a 2-D tensor's main diagonal."""
    if input.ndim != 2:
        raise ShapeError(f"trace: expected a 2-D tensor, got shape {tuple(input.shape)}")
    return diagonal(input).sum()


# --- einsum -----------------------------------------------------------------------------------------
class Einsum(Function):
    """``np.einsum`` over explicit subscripts (``subs``, one string per operand, and ``output``; ``...`` already
    spelled out as letters by ``einsum``). The gradient of operand k is einsum again: the other operands and
    the output gradient, contracted to operand k's subscripts (a repeated letter, as in ``ii->i``, is
    spread over an identity; a letter summed only in k over ones): ``_grad_plans``."""

    @staticmethod
    def forward(ctx, *arrays, subs, output):
        ctx.save_for_backward(*arrays)
        ctx.subs, ctx.output = subs, output
        return ctx.xp.einsum(f"{','.join(subs)}->{output}", *arrays, optimize=len(arrays) > 2)

    @staticmethod
    def backward(ctx, grad):
        arrays = ctx.saved_tensors
        plans = _grad_plans(ctx.subs, ctx.output, arrays)
        return tuple(ctx.xp.einsum(eq, *_operands(ctx, arrays, grad, ops, grad.dtype, lambda a: a),
                                   optimize=len(ops) > 2)
                     if need else None for need, (eq, ops) in zip(ctx.needs_input_grad, plans))

    @staticmethod
    def vjp(ctx, grad):
        tensors = ctx.saved_tensors
        plans = _grad_plans(ctx.subs, ctx.output, [t.array for t in tensors])
        constant = lambda a: const(ctx, a)    # noqa: E731
        return tuple(einsum(eq, *_operands(ctx, tensors, grad, ops, grad.array.dtype, constant)) if need else None
                     for need, (eq, ops) in zip(ctx.needs_input_grad, plans))

    @staticmethod
    def jvp(primals, tangents, out, subs, output):
        eq = f"{','.join(subs)}->{output}"
        return tsum(*(einsum(eq, *primals[:k], t, *primals[k + 1:]) for k, t in enumerate(tangents)
                      if t is not None))


def _operands(ctx, inputs, grad, specs, dtype, constant):
    """The operands of a gradient einsum from their specs: ('in', j), ('grad',), ('eye', n), ('ones', n);
    ``constant`` wraps the identities and ones (arrays in backward, constant Tensors in vjp)."""
    for kind, *n in specs:
        if kind == "in":
            yield inputs[n[0]]
        elif kind == "grad":
            yield grad
        else:
            yield constant((ctx.xp.eye if kind == "eye" else ctx.xp.ones)(n[0], dtype=dtype))


def _grad_plans(subs, out, arrays):
    """Per operand: (equation, operand specs) of its gradient."""
    sizes = {c: n for s, a in zip(subs, arrays) for c, n in zip(s, a.shape)}
    fresh = [c for c in string.ascii_letters if c not in set("".join(subs))]
    plans = []
    for k, s in enumerate(subs):
        terms = [(subs[j], ("in", j)) for j in range(len(subs)) if j != k] + [(out, ("grad",))]
        target, seen, spare = [], set(), iter(fresh)
        for c in s:
            if c in seen:                    # a repeated letter: a fresh one, tied to it by an identity
                f = next(spare)
                terms.append((c + f, ("eye", sizes[c])))
                target.append(f)
            else:
                seen.add(c)
                target.append(c)
        present = set("".join(t for t, _ in terms))
        terms += [(c, ("ones", sizes[c])) for c in sorted(seen - present)]   # summed in k only
        plans.append((f"{','.join(t for t, _ in terms)}->{''.join(target)}", [o for _, o in terms]))
    return plans


def _parse_einsum(equation, tensors):
    """``equation`` -> (one subscript string per operand, the output's), ``...`` replaced by letters."""
    eq = equation.replace(" ", "")
    lhs, arrow, out = eq.partition("->")
    ins = lhs.split(",")
    if len(ins) != len(tensors):
        raise ArgumentError(f"einsum: the equation {equation!r} names {len(ins)} operands, got {len(tensors)}")
    bad = set(eq) - set(string.ascii_letters) - set(",->.")
    if bad or any(s.replace("...", "").count(".") for s in ins + [out]):
        raise ArgumentError(f"einsum: invalid subscripts in {equation!r} (letters a-z, A-Z and '...' only)")
    free = [c for c in string.ascii_letters if c not in eq]
    n_ell = max((t.ndim - len(s) + 3 for s, t in zip(ins, tensors) if "..." in s), default=0)
    ell = "".join(free[:max(n_ell, 0)])
    subs = []
    for i, (s, t) in enumerate(zip(ins, tensors)):
        if "..." in s:
            k = t.ndim - len(s) + 3
            s = s.replace("...", ell[len(ell) - k:] if k > 0 else "")
        if len(s) != t.ndim:
            raise ShapeError(f"einsum: operand {i} has {t.ndim} dims (shape {tuple(t.shape)}) but the subscripts "
                             f"{ins[i]!r} name {len(s)}")
        subs.append(s)
    if not arrow:
        counts = Counter(c for s in subs for c in s if c not in ell)
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1))
    else:
        out = out.replace("...", ell)
        if len(set(out)) != len(out) or set(out) - set("".join(subs)):
            raise ArgumentError(f"einsum: output subscripts {out!r} repeat a letter or name one that no "
                                f"operand has ({equation!r})")
    return subs, out


def einsum(equation, *operands):
    """PyTorch's einsum: ``einsum('ij,jk->ik', a, b)`` or ``einsum('ij,jk', [a, b])``; ``...`` and an
    implicit output (letters used once, in alphabetical order) as in NumPy. Differentiable in every operand."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands or not all(isinstance(t, Tensor) for t in operands):
        raise ArgumentError("einsum: expected one or more tensor operands after the equation")
    subs, out = _parse_einsum(equation, operands)
    sizes = {}
    for s, t in zip(subs, operands):
        own = {}
        for c, n in zip(s, t.shape):
            if own.setdefault(c, n) != n or sizes.get(c, 1) not in (1, n) and n != 1:
                raise ShapeError(f"einsum: subscript {c!r} has sizes {own[c] if own[c] != n else sizes[c]} and "
                                 f"{n} (shapes {[tuple(t.shape) for t in operands]}, {equation!r})")
            sizes[c] = max(sizes.get(c, 1), n)
    operands = [t if all(sizes[c] == n for c, n in zip(s, t.shape)) else t.expand(*(sizes[c] for c in s))
                for s, t in zip(subs, operands)]   # size-1 dims broadcast (the expand's gradient sums back)
    return Einsum.apply(*operands, subs=tuple(subs), output=out)


class LinalgMethods:
    """Tensor's matrix products (``x @ w``): a mixin of ``Tensor``."""
    __slots__ = ()
    __matmul__ = matmul
    matmul, mm, bmm, addmm, baddbmm, outer, ger = matmul, mm, bmm, addmm, baddbmm, outer, outer
    diag, diagonal, trace = diag, diagonal, trace

    def __rmatmul__(self, other):
        return matmul(as_tensor_like(other, self), self)
