"""``minigrad.onnx.export(model, example_inputs, "model.onnx")``: a traced forward as an ONNX model.

The forward is traced once on the example inputs (``capture.py``), every op is converted by the table in
``converters.py``, parameters become initializers, and the result is checked with ``onnx.checker`` before
it is written (atomically). An op without a converter is an ``UnsupportedOpError`` naming the op and the
line of the model that called it. Run the file with onnxruntime::

    import onnxruntime as ort
    sess = ort.InferenceSession("model.onnx")
    sess.run(None, {"input": x.numpy()})
"""
import os

import numpy as np
import onnx
from onnx import helper

from ..errors import ArgumentError
from ..serialization import atomic_write
from ..tensor import Tensor
from .capture import capture
from .converters import CONVERTERS, OPSET, Builder, UnsupportedOpError

IR_VERSION = 9   # read by every onnxruntime since 1.16


def export(model, example_inputs, f, *, input_names=None, output_names=None, opset_version=OPSET):
    """Export ``model`` (an ``nn.Module`` or a function of tensors) traced on ``example_inputs`` (a Tensor
    or a tuple of Tensors) to ``f`` (a path, or None to only return it); returns the ``onnx.ModelProto``.
    Modules are exported in their current mode: call ``model.eval()`` first, as with ``torch.onnx.export``."""
    inputs = (example_inputs,) if isinstance(example_inputs, Tensor) else tuple(example_inputs)
    if not inputs or not all(isinstance(t, Tensor) for t in inputs):
        raise ArgumentError(f"onnx.export: example_inputs must be a Tensor or a non-empty tuple of Tensors, got "
                            f"{type(example_inputs).__name__}")
    if opset_version != OPSET:
        raise ArgumentError(f"onnx.export: only opset {OPSET} is generated, got opset_version={opset_version}")
    cap = capture(model, inputs)
    b = Builder(cap)
    for call in cap.ops:
        convert = CONVERTERS.get(call.op)
        if convert is None:
            raise UnsupportedOpError(f"onnx.export: op {call.op!r} has no ONNX converter (called at "
                                     f"{call.where or 'an unknown line'}); supported ops: "
                                     f"{', '.join(sorted(CONVERTERS))}")
        try:
            convert(b, call)
        except UnsupportedOpError as e:
            raise UnsupportedOpError(f"onnx.export: {e} (op {call.op!r} at {call.where or '?'})") from None
    in_names = _names(input_names, [n for n, _, _ in cap.inputs], "input_names")
    out_names = _names(output_names, ["output"] if len(cap.outputs) == 1 else
                       [f"output_{i}" for i in range(len(cap.outputs))], "output_names")
    rename = dict(zip([n for n, _, _ in cap.inputs], in_names))
    for node in b.nodes:
        node.input[:] = [rename.get(i, i) for i in node.input]
    for old, new in zip(cap.outputs, out_names):        # outputs: an Identity to the public name
        b.nodes.append(helper.make_node("Identity", [rename.get(old, old)], [new]))
    initializers = [onnx.numpy_helper.from_array(np.ascontiguousarray(a), n) for n, a in cap.consts.items()
                    if any(n in node.input for node in b.nodes)]
    graph = helper.make_graph(
        b.nodes, "minigrad", [helper.make_tensor_value_info(new, _proto(dt), list(shape))
                              for new, (_, shape, dt) in zip(in_names, cap.inputs)],
        [helper.make_tensor_value_info(new, _proto(cap.dtypes[old]), list(cap.shapes[old]))
         for old, new in zip(cap.outputs, out_names)],
        initializer=initializers + b.initializers)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="minigrad")
    proto.ir_version = IR_VERSION
    onnx.checker.check_model(proto)
    if f is not None:
        atomic_write(os.fspath(f), lambda fh: fh.write(proto.SerializeToString()))
    return proto


def _names(given, default, what):
    if given is None:
        return list(default)
    if len(given) != len(default):
        raise ArgumentError(f"onnx.export: {len(given)} {what} for {len(default)} values")
    return list(given)


def _proto(dtype):
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
