"""minigrad.nn: neural-network building blocks, as ``torch.nn``.

``Module`` and ``Parameter``; layers (``Linear``, ``Conv2d``, ``BatchNorm2d``, ``MultiheadAttention``,
``TransformerBlock``...); losses as modules; ``nn.init``; ``nn.utils.clip_grad_norm_``; ``nn.functional``.
"""
from . import functional
from . import init, utils
from ..errors import StateDictError
from .module import Module, RemovableHandle
from .modules import *  # noqa: F401,F403
from .modules import __all__ as _modules_all
from .parameter import Parameter

__all__ = ["functional", "init", "utils", "Module", "Parameter", "RemovableHandle", "StateDictError"] + \
    list(_modules_all)
