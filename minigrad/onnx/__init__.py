"""minigrad.onnx: export a traced model to ONNX (needs the ``onnx`` package: ``pip install minigrad[export]``).

    minigrad.onnx.export(model.eval(), (x,), "model.onnx")     # then onnxruntime.InferenceSession(...)

    capture.py     the adapter from minigrad's graph-capture IR to the exporter's records (one place)
    converters.py  one converter per op (opset 18) and the table of supported ops
    export.py      export(): trace, convert, check, write
"""
from .capture import CaptureError
from .converters import CONVERTERS, OPSET, UnsupportedOpError
from .export import export

SUPPORTED_OPS = tuple(sorted(CONVERTERS))

__all__ = ["CaptureError", "OPSET", "SUPPORTED_OPS", "UnsupportedOpError", "export"]
