"""minigrad ops -> ONNX nodes (opset 18), one small function per op, in a table keyed by op name.

Each converter gets the ``Builder`` and an ``OpCall`` (``capture.py``) and returns the name of the ONNX
value holding the op's result. Ops ONNX has as one operator map to it (``relu`` -> Relu, ``conv2d`` ->
Conv); the others are composed from primitives with the same maths minigrad uses (``linear`` is
``MatMul(x, W^T) + b``; ``gelu`` with tanh is GPT-2's formula; ``scaled_dot_product_attention`` is
``Softmax(q k^T * scale + mask) v``).
"""
import math

import numpy as np
from onnx import helper, numpy_helper

from .capture import Ref

OPSET = 18


class UnsupportedOpError(NotImplementedError):
    """An op the exporter has no converter for; the message names it and where the model called it."""


class Builder:
    def __init__(self, captured):
        self.cap, self.nodes, self.initializers, self._n = captured, [], [], 0
        self.dtypes = dict(captured.dtypes)

    def fresh(self, base):
        self._n += 1
        return f"{base}__{self._n}"

    def const(self, array, base="c"):
        name = self.fresh(base)
        array = np.asarray(array)
        self.initializers.append(numpy_helper.from_array(array, name))
        self.dtypes[name] = array.dtype
        return name

    def node(self, op_type, inputs, out=None, dtype=None, **attrs):
        out = out or self.fresh(op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], **attrs))
        if dtype is not None:
            self.dtypes[out] = np.dtype(dtype)
        return out

    def value(self, a, like=None):
        """An argument as an ONNX value name: a Ref as is, a Python number as a constant of ``like``'s dtype."""
        if isinstance(a, Ref):
            return a.name
        dtype = self.dtypes.get(like, np.float32) if like is not None else np.float32
        return self.const(np.array(a, dtype=dtype))

    def ints(self, values, base="i"):
        return self.const(np.array(values, dtype=np.int64), base)


def _unary(op_type):
    return lambda b, c: b.node(op_type, [b.value(c.args[0])], c.out)


def _binary(op_type):
    def convert(b, c):
        x, y = c.args[:2]
        ref = x.name if isinstance(x, Ref) else y.name
        return b.node(op_type, [b.value(x, ref), b.value(y, ref)], c.out)
    return convert


def _linear(b, c):
    x, w, bias = (list(c.args) + [None, None])[:3]
    wt = b.const(b.cap.consts[w.name].T.copy(), "weight_t") if w.name in b.cap.consts else \
        b.node("Transpose", [w.name], perm=[1, 0])
    y = b.node("MatMul", [x.name, wt], None if bias is not None else c.out)
    return b.node("Add", [y, bias.name], c.out) if bias is not None else y


def _gelu(b, c):
    x = b.value(c.args[0])
    half, one = b.value(0.5, x), b.value(1.0, x)
    if c.kwargs.get("approximate", "none") == "tanh":   # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        cube = b.node("Mul", [b.node("Mul", [x, x]), x])
        inner = b.node("Add", [x, b.node("Mul", [cube, b.value(0.044715, x)])])
        t = b.node("Tanh", [b.node("Mul", [inner, b.value(math.sqrt(2 / math.pi), x)])])
    else:                                                # 0.5 x (1 + erf(x / sqrt 2))
        t = b.node("Erf", [b.node("Mul", [x, b.value(1 / math.sqrt(2), x)])])
    return b.node("Mul", [b.node("Mul", [x, half]), b.node("Add", [t, one])], c.out)


def _silu(b, c):
    x = b.value(c.args[0])
    return b.node("Mul", [x, b.node("Sigmoid", [x])], c.out)


def _pow(b, c):
    x, e = c.args[:2]
    return b.node("Pow", [b.value(x), b.value(e, x.name)], c.out)


def _conv2d(b, c):
    (ph0, ph1), (pw0, pw1) = c.kwargs["pads"]
    ins = [b.value(a) for a in c.args if a is not None]
    return b.node("Conv", ins, c.out, strides=list(c.kwargs["stride"]), pads=[ph0, pw0, ph1, pw1],
                  dilations=list(c.kwargs["dilation"]), group=int(c.kwargs["groups"]))


def _pool_pads(pads):
    ph, pw = pads
    return [ph, pw, ph, pw]


def _max_pool2d(b, c):
    k = c.kwargs
    return b.node("MaxPool", [b.value(c.args[0])], c.out, kernel_shape=list(k["kernel"]), strides=list(k["stride"]),
                  pads=_pool_pads(k["pads"]), dilations=list(k["dilation"]), ceil_mode=int(k["ceil_mode"]))


def _avg_pool2d(b, c):
    k = c.kwargs
    if k.get("divisor_override") is not None:
        raise UnsupportedOpError("avg_pool2d with divisor_override has no ONNX equivalent")
    return b.node("AveragePool", [b.value(c.args[0])], c.out, kernel_shape=list(k["kernel"]),
                  strides=list(k["stride"]), pads=_pool_pads(k["pads"]), ceil_mode=int(k["ceil_mode"]),
                  count_include_pad=int(k["count_include_pad"]))


def _adaptive_avg_pool2d(b, c):
    if tuple(c.kwargs["output_size"]) != (1, 1):
        raise UnsupportedOpError("adaptive_avg_pool2d to a size other than 1x1 has no ONNX equivalent")
    return b.node("GlobalAveragePool", [b.value(c.args[0])], c.out)


def _batch_norm(b, c):
    if c.kwargs.get("training"):
        raise UnsupportedOpError("batch_norm in training mode (call model.eval() before exporting)")
    x, mean, var, w, bias = c.args
    C = c.shape[1]
    dt = b.dtypes[x.name]
    w = b.value(w) if w is not None else b.const(np.ones(C, dt))
    bias = b.value(bias) if bias is not None else b.const(np.zeros(C, dt))
    return b.node("BatchNormalization", [x.name, w, bias, mean.name, var.name], c.out, epsilon=c.kwargs["eps"])


def _layer_norm(b, c):
    x, w, bias = c.args
    ns = c.kwargs["normalized_shape"]
    dt = b.dtypes[x.name]
    w = b.value(w) if w is not None else b.const(np.ones(ns, dt))
    ins = [x.name, w] + ([bias.name] if bias is not None else [])
    return b.node("LayerNormalization", ins, c.out, axis=-len(ns), epsilon=c.kwargs["eps"])


def _embedding(b, c):
    idx, w = c.args[:2]
    return b.node("Gather", [w.name, idx.name], c.out, axis=0)


def _reshape(b, c):
    return b.node("Reshape", [b.value(c.args[0]), b.ints(list(c.kwargs["shape"]))], c.out)


def _transpose(b, c):
    nd = len(c.shape)
    perm = list(range(nd))
    d0, d1 = c.kwargs["dim0"] % nd, c.kwargs["dim1"] % nd
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return b.node("Transpose", [b.value(c.args[0])], c.out, perm=perm)


def _permute(b, c):
    nd = len(c.shape)
    return b.node("Transpose", [b.value(c.args[0])], c.out, perm=[d % nd for d in c.kwargs["dims"]])


def _softmax(op_type):
    return lambda b, c: b.node(op_type, [b.value(c.args[0])], c.out, axis=int(c.kwargs["dim"]))


def _reduce(op_type):
    def convert(b, c):
        dim = c.kwargs.get("dim")
        ins = [b.value(c.args[0])]
        if dim is not None:
            ins.append(b.ints(list(dim) if isinstance(dim, (tuple, list)) else [dim]))
        return b.node(op_type, ins, c.out, keepdims=int(bool(c.kwargs.get("keepdim", False))))
    return convert


def _cat(b, c):
    return b.node("Concat", [b.value(a) for a in c.args], c.out, axis=int(c.kwargs["dim"]))


def _getitem(b, c):
    index = c.kwargs["index"]
    index = index if isinstance(index, tuple) else (index,)
    if not all(isinstance(i, (int, slice)) and not isinstance(i, bool) for i in index) or \
            any(isinstance(i, slice) and i.step not in (None, 1) for i in index):
        raise UnsupportedOpError(f"getitem with index {index!r} (only integers and step-1 slices export)")
    starts, ends, axes, squeeze = [], [], [], []
    for axis, i in enumerate(index):
        if isinstance(i, int):
            starts.append(i), ends.append(i + 1 if i != -1 else 2 ** 62), axes.append(axis), squeeze.append(axis)
        elif i != slice(None):
            starts.append(0 if i.start is None else i.start)
            ends.append(2 ** 62 if i.stop is None else i.stop)
            axes.append(axis)
    x = b.value(c.args[0])
    if not axes:
        return b.node("Identity", [x], c.out)
    y = b.node("Slice", [x, b.ints(starts), b.ints(ends), b.ints(axes)], None if squeeze else c.out)
    return b.node("Squeeze", [y, b.ints(squeeze)], c.out) if squeeze else y


def _attention(b, c):
    q, k, v, mask = c.args
    if c.kwargs.get("dropout_p", 0.0):
        raise UnsupportedOpError("scaled_dot_product_attention with dropout (export in eval mode)")
    dt, qshape, kshape = b.dtypes[q.name], b.cap.shapes[q.name], b.cap.shapes[k.name]
    scale = c.kwargs.get("scale")
    scale = 1.0 / math.sqrt(qshape[-1]) if scale is None else float(scale)   # traced shapes are static
    nd = len(kshape)
    kt = b.node("Transpose", [k.name], perm=list(range(nd - 2)) + [nd - 1, nd - 2])
    scores = b.node("Mul", [b.node("MatMul", [q.name, kt]), b.value(scale, q.name)])
    if c.kwargs.get("is_causal"):                     # keep j <= i, top-left aligned (as the op)
        tri = np.triu(np.full((qshape[-2], kshape[-2]), -np.inf, dtype=dt), 1)
        scores = b.node("Add", [scores, b.const(tri, "causal")])
    elif mask is not None:
        if np.dtype(b.dtypes[mask.name]) == np.bool_:
            scores = b.node("Where", [mask.name, scores, b.const(np.array(-np.inf, dt))])
        else:
            scores = b.node("Add", [scores, mask.name])
    return b.node("MatMul", [b.node("Softmax", [scores], axis=-1), v.name], c.out)


def _dropout(b, c):
    return b.node("Identity", [b.value(c.args[0])], c.out)


def _to(b, c):
    return b.node("Cast", [b.value(c.args[0])], c.out, to=helper.np_dtype_to_tensor_dtype(np.dtype(c.dtype)))


CONVERTERS = {
    "add": _binary("Add"), "sub": _binary("Sub"), "mul": _binary("Mul"), "div": _binary("Div"),
    "matmul": _binary("MatMul"), "maximum": _binary("Max"), "minimum": _binary("Min"), "pow": _pow,
    "neg": _unary("Neg"), "exp": _unary("Exp"), "log": _unary("Log"), "sqrt": _unary("Sqrt"),
    "abs": _unary("Abs"), "relu": _unary("Relu"), "sigmoid": _unary("Sigmoid"), "tanh": _unary("Tanh"),
    "leaky_relu": lambda b, c: b.node("LeakyRelu", [b.value(c.args[0])], c.out,
                                      alpha=float(c.kwargs["negative_slope"])),
    "gelu": _gelu, "silu": _silu, "softmax": _softmax("Softmax"), "log_softmax": _softmax("LogSoftmax"),
    "linear": _linear, "conv2d": _conv2d, "max_pool2d": _max_pool2d, "avg_pool2d": _avg_pool2d,
    "adaptive_avg_pool2d": _adaptive_avg_pool2d, "batch_norm": _batch_norm, "layer_norm": _layer_norm,
    "embedding": _embedding, "reshape": _reshape, "transpose": _transpose, "permute": _permute,
    "sum": _reduce("ReduceSum"), "mean": _reduce("ReduceMean"), "cat": _cat, "getitem": _getitem,
    "scaled_dot_product_attention": _attention, "flash_attention": _attention, "dropout": _dropout,
    "to_dtype": _to,
}

