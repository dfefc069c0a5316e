"""Autograd: Function (one op = forward + backward), the engine, grad modes, gradcheck, anomaly mode."""
from .anomaly import detect_anomaly, is_anomaly_enabled
from .engine import backward, grad, queue_callback, topological_order
from .function import AccumulateGrad, Function, saved_tensors_hooks
from .grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .gradcheck import gradcheck
from ..errors import GradcheckError


class graph:  # namespace mirroring torch.autograd.graph
    saved_tensors_hooks = saved_tensors_hooks


__all__ = ["AccumulateGrad", "Function", "GradcheckError", "backward", "detect_anomaly", "enable_grad",
           "grad", "gradcheck", "graph", "is_anomaly_enabled", "is_grad_enabled", "no_grad",
           "queue_callback", "saved_tensors_hooks", "set_grad_enabled", "topological_order"]
