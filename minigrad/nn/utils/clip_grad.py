"""Gradient clipping: ``clip_grad_norm_`` (rescale all gradients together) and ``clip_grad_value_``.

Both work on the gradient arrays in place (no graph), with the array module of each gradient's device.
"""
import math

import numpy as np

from ...errors import AutogradError
from ...tensor import Tensor


def _grads(parameters):
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def _tensor_norm(xp, g, norm_type):
    """Norm of one array (float32 or wider accumulation for half precision)."""
    a = g.array
    if a.dtype.itemsize < 4:
        a = a.astype(np.float32)
    if norm_type == 2.0:
        flat = a.reshape(-1)
        return xp.sqrt(xp.dot(flat, flat)) if a.flags.c_contiguous else xp.sqrt((a * a).sum())
    if math.isinf(norm_type):
        return xp.abs(a).max() if norm_type > 0 else xp.abs(a).min()
    if norm_type == 1.0:
        return xp.abs(a).sum()
    if norm_type == 0:
        return (a != 0).sum().astype(a.dtype)
    return (xp.abs(a) ** norm_type).sum() ** (1.0 / norm_type)


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False):
    """The ``norm_type`` norm of all ``tensors`` (gradients) viewed as one vector, as a 0-d tensor."""
    norm_type = float(norm_type)
    if isinstance(tensors, Tensor):
        tensors = [tensors]
    tensors = [t for t in tensors if t is not None]
    if not tensors:
        from ...creation import zeros
        return zeros(())
    first = tensors[0]
    xp = first.device.xp
    norms = [_tensor_norm(t.device.xp, t, norm_type) for t in tensors]
    if any(t.device != first.device for t in tensors):
        norms = [float(n) for n in norms]
    norms = xp.stack([xp.asarray(n, dtype=np.result_type(first.array.dtype, np.float32)) for n in norms])
    if math.isinf(norm_type):
        total = norms.max() if norm_type > 0 else norms.min()
    elif norm_type == 0:
        total = norms.sum()
    else:
        total = (norms ** norm_type).sum() ** (1.0 / norm_type) if norm_type != 1.0 else norms.sum()
    if error_if_nonfinite and not bool(xp.isfinite(total)):
        raise AutogradError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, "
                            f"so it cannot be clipped. To disable this error and scale the gradients by the "
                            f"non-finite norm anyway, set `error_if_nonfinite=False`")
    out_dtype = first.array.dtype if first.array.dtype.itemsize >= 4 else np.float32
    return Tensor._make(xp.asarray(total, dtype=out_dtype).reshape(()), first.device)


def clip_grads_with_norm_(parameters, max_norm, total_norm):
    """Scale every gradient by min(1, max_norm / (total_norm + 1e-6)) in place."""
    grads = _grads(parameters)
    if not grads:
        return
    coef = float(max_norm) / (float(total_norm) + 1e-6)
    if coef < 1.0:
        for g in grads:
            g.array *= g.array.dtype.type(coef)
            g._version_counter.bump()


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Rescale the gradients of ``parameters`` so that their joint norm is at most ``max_norm``.

    The total norm is that of all gradients concatenated into one vector; when it exceeds ``max_norm``
    every gradient is multiplied by ``max_norm / (total_norm + 1e-6)``. Returns the total norm *before*
    clipping (a 0-d tensor), as PyTorch does. A non-finite norm raises when ``error_if_nonfinite``.
    """
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    parameters = list(parameters)
    total = get_total_norm(_grads(parameters), norm_type, error_if_nonfinite)
    clip_grads_with_norm_(parameters, max_norm, total)
    return total


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient element of ``parameters`` to [-clip_value, clip_value] in place."""
    v = float(clip_value)
    for g in _grads(parameters):
        g.device.xp.clip(g.array, -v, v, out=g.array)
        g._version_counter.bump()
