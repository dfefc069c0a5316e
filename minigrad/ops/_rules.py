"""Helpers of the beyond-first-order rules each op defines beside its backward (who uses them: every ops
module): ``vjp(ctx, grad)`` (backward in Tensor ops, for ``create_graph``: autograd/higher_order.py) and
``jvp(primals, tangents, out, **options)`` (forward mode: autograd/forward_ad.py)."""
from ..tensor_base import TensorBase as Tensor


def const(ctx, array):
    """A backend array (a mask, an index, a value computed in forward) as a constant Tensor on the op's device."""
    return Tensor._make(array, ctx.device)


def tsum(*terms):
    """The sum of the terms that are not None (a tangent's contributions), or None when all are."""
    out = None
    for t in terms:
        if t is not None:
            out = t if out is None else out + t
    return out


def linear_jvp(fn):
    """The JVP rule of an op linear in its one tensor input: the op applied to the tangent."""
    def jvp(primals, tangents, out, **options):
        return None if tangents[0] is None else fn(tangents[0], **options)
    return staticmethod(jvp)


def _apply_to_tangent(cls, primals, tangents, out, **options):
    return None if tangents[0] is None else cls.apply(tangents[0], **options)


# ``jvp = linear`` in an op linear in its one tensor input: the tangent goes through the op itself
linear = classmethod(_apply_to_tangent)


def zeros_for(tangents, primals):
    """Tangents with each missing one (None) made zeros of its primal's shape: for ops of several inputs
    whose JVP is the op itself applied to the tangents (cat, stack)."""
    return [t if t is not None else Tensor._make(p.device.xp.zeros_like(p.array), p.device)
            for t, p in zip(tangents, primals)]


def composite_jvp(fn, primals, tangents):
    """The JVP of an op through ``fn``, its forward written in minigrad ops: ``fn`` runs on dual tensors
    (forward mode through the ops it is made of)."""
    from ..autograd import forward_ad
    duals = [forward_ad.make_dual(p, t) if t is not None else p for p, t in zip(primals, tangents)]
    return forward_ad.unpack_dual(fn(*duals)).tangent
