"""One op at another precision, in one step: the casts happen inside ``Function.apply``.

When an ``input_casts`` callback (autocast) returns ``extensions.Casts(dtype, compute, cast)`` for an op,
``Function.apply`` calls the three functions below around the op's ``forward``; the op stays one graph
node, with one edge per input in that input's own dtype:

    inputs    each floating tensor input converted to ``dtype`` (float16, say) and, when ``compute``
              differs, widened to it; ``cast(tensor) -> (stored, computed)`` can supply both (autocast's
              weight-cast cache lives there)                                       -> convert_inputs
    output    rounded from ``compute`` to ``dtype``                                 -> round_output
    saved     stored in ``dtype``: an input's own ``dtype`` array for its widened copy (nothing stored
              twice), the rounded output for the output; widened again when backward reads them; the
              op's backward runs in ``compute`` (its incoming gradient is widened: ``widen``),
              and each input's gradient is converted to that input's dtype by the engine   -> store_saved

``compute`` differs from ``dtype`` on NumPy devices: NumPy has no float16 arithmetic (each float16 ufunc
loop converts every element to float32 and back, in software), so float16 ops compute in float32 on
float16 storage -- what PyTorch's CPU kernels do with their *opmath* type, and what a GPU does in
registers. The values are those of float16 storage with float32 arithmetic. On a real GPU ``compute`` is
float16 and only the inputs are converted.
"""
import numpy as np

from ..backend.dtypes import FLOAT_KINDS
from ..backend.layout import empty_in_order, memory_order

Tensor = None  # set by function.bind_tensor_class


def convert(be, array, dtype):
    """``array`` converted to ``dtype``, in storage from the device's backend (the memory pool when on),
    with the same memory layout. Values beyond float16's range become inf, as on a GPU (GradScaler's
    signal), without a warning."""
    out = empty_in_order(be.empty, array.shape, dtype, memory_order(array))
    if be.xp is np:
        with np.errstate(over="ignore"):
            np.copyto(out, array, casting="unsafe")
    else:
        be.xp.copyto(out, array, casting="unsafe")
    return out


def convert_inputs(casts, args, raw, be):
    """Replace the floating tensor inputs in ``raw`` (args unwrapped) by what the op computes on; returns
    ``[(array computed on, array stored)]`` for those that differ (``store_saved`` keeps the second)."""
    dtype, compute, cast = casts.dtype, casts.compute, casts.cast
    kept = []
    for i, a in enumerate(args):
        if not isinstance(a, Tensor) or raw[i].dtype.kind not in FLOAT_KINDS:
            continue
        if cast is not None:
            stored, computed = cast(a)
        else:
            stored = raw[i] if raw[i].dtype == dtype else convert(be, raw[i], dtype)
            computed = stored if compute == dtype else convert(be, stored, compute)
        if computed is not stored:
            kept.append((computed, stored))
        raw[i] = computed
    return kept


def round_output(casts, out, be):
    """The op's output, computed in ``compute``, stored in ``dtype``."""
    if casts.compute != casts.dtype and out.dtype == casts.compute:
        return convert(be, out, casts.dtype)
    return out


def store_saved(ctx, casts, kept, computed, out, hooks, be):
    """Keep what the op saved in ``dtype`` (then packed by the saved-tensor hooks in force, if any), and
    have backward read it, and compute, in ``compute``."""
    dtype, compute = casts.dtype, casts.compute
    narrow = compute != dtype
    adopt = be.adopt if be.allocator is not None and hooks is None else None
    stored, arrays = [], []
    for s in ctx._saved:
        if s is computed:
            s = out
        elif narrow and getattr(s, "dtype", None) == compute:
            low = next((lo for wide, lo in kept if wide is s), None)
            s = low if low is not None else convert(be, s, dtype)
        is_array = isinstance(s, be.array_type)
        if is_array and adopt is not None:
            s = adopt(s)
        stored.append(s)
        arrays.append(is_array)
    unpack = None
    if hooks is not None:  # the user's hooks see the arrays as stored (float16), as without autocast
        pack, unpack = hooks
        stored = [pack(s) if p else s for s, p in zip(stored, arrays)]
    ctx._saved, ctx._packed = tuple(stored), tuple(arrays)
    if narrow:
        ctx._compute = compute
        ctx._unpack = _widening(be, dtype, compute, unpack)
    elif unpack is not None:
        ctx._unpack = unpack


def _widening(be, dtype, compute, unpack):
    def read(obj):
        a = obj if unpack is None else unpack(obj)
        return convert(be, a, compute) if getattr(a, "dtype", None) == dtype else a
    return read


def widen(node, grad):
    """The gradient a node receives (in its output's dtype), in the dtype its backward computes in."""
    return grad if grad.dtype == node._compute else convert(node.device.backend, grad, node._compute)
