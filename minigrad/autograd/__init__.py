"""Autograd: Function (one op = forward + backward), the engine, grad modes, gradcheck, anomaly mode, and
the extension points features plug into (``extensions``)."""
from . import extensions, forward_ad
from .anomaly import detect_anomaly, is_anomaly_enabled
from .engine import backward, grad, queue_callback, topological_order
from .extensions import saved_tensors_hooks
from .function import AccumulateGrad, Edge, Function
from .grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .gradcheck import gradcheck, gradgradcheck
from .inference_mode import inference_mode, is_inference_mode_enabled
from .variable import Variable
from ..errors import GradcheckError


class graph:  # namespace mirroring torch.autograd.graph
    saved_tensors_hooks = saved_tensors_hooks


__all__ = ["AccumulateGrad", "Edge", "Function", "GradcheckError", "backward", "detect_anomaly", "enable_grad",
           "extensions", "forward_ad", "grad", "gradcheck", "gradgradcheck", "graph", "inference_mode",
           "is_anomaly_enabled", "is_grad_enabled", "is_inference_mode_enabled", "no_grad",
           "queue_callback", "saved_tensors_hooks", "set_grad_enabled", "topological_order", "Variable"]
