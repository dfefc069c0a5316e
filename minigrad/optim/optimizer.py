"""Optimizer: the base class (param groups, per-parameter state, zero_grad, state_dict), as in PyTorch.

A subclass defines ``step()``. Its arithmetic lives in one module-level function per optimizer
(``sgd_update``, ``adam_update``, ``rmsprop_update``) working on backend arrays in place with NumPy/CuPy
ufuncs (``out=``), so it is the single place a fused GPU kernel can replace. The step loop looks the
function up in the class's ``kernels`` dict by device type ('cpu', 'cuda') and falls back to the default.

State tensors (momentum buffers, Adam moments) are Tensors on the parameter's device; ``step`` counts are
Python ints. ``state_dict()`` refers to parameters by index (0, 1, ... over all groups in order), so it can
be loaded into an optimizer built over a fresh copy of the model, and saved with ``mg.save``.
"""
import abc
import copy
from collections import defaultdict

import numpy as np

from ..autograd.grad_mode import enable_grad
from ..autograd.grads import zero_grad
from ..backend.device import get_backend
from ..errors import ArgumentError, DTypeError
from ..tensor import Tensor


class _RequiredParameter:
    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


class Optimizer(abc.ABC):
    """Base class: ``Optimizer(params, defaults)``; ``params`` is an iterable of tensors or of dicts
    (param groups: ``{'params': [...], 'lr': ...}``) whose missing options come from ``defaults``."""

    kernels = {}  # device type -> update function (subclasses set their own dict)

    def __init__(self, params, defaults):
        self.defaults = defaults
        self.state = defaultdict(dict)
        self.param_groups = []
        if isinstance(params, Tensor):
            raise TypeError(f"params argument given to the optimizer should be an iterable of Tensors or "
                            f"dicts, but got {type(params).__name__}")
        if isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the "
                            "ordering of tensors in sets will change between runs. Please use a list instead.")
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ArgumentError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    def __repr__(self):
        lines = [type(self).__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for key in sorted(group):
                if key != "params":
                    lines.append(f"    {key}: {group[key]}")
        lines.append(")")
        return "\n".join(lines)

    def add_param_group(self, param_group):
        """Add a group of parameters (a dict with 'params' and optional per-group options)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the "
                            "ordering of tensors in sets will change between runs. Please use a list instead.")
        else:
            params = list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is "
                                f"{type(p).__name__}")
            if p.grad_fn is not None:
                raise ArgumentError("can't optimize a non-leaf Tensor")
            if not p.is_floating_point():
                raise DTypeError(f"optimizer can only optimize floating point tensors, got {p.dtype}")
        group = dict(param_group)
        group["params"] = params
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ArgumentError(f"parameter group didn't specify a value of required optimization "
                                    f"parameter {name}")
            group.setdefault(name, default)
        ids = [id(p) for p in params]
        if len(set(ids)) != len(ids):
            raise ArgumentError("optimizer contains a parameter group with duplicate parameters")
        existing = {id(p) for g in self.param_groups for p in g["params"]}
        if existing.intersection(ids):
            raise ArgumentError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    def zero_grad(self, set_to_none=True):
        """Reset the gradients of all optimized parameters (to None by default, else zeros in place)."""
        for group in self.param_groups:
            zero_grad(group["params"], set_to_none)

    @abc.abstractmethod
    def step(self, closure=None):
        """Update every parameter from its ``.grad`` (each optimizer defines its own rule)."""

    def _closure_loss(self, closure):
        if closure is None:
            return None
        with enable_grad():
            return closure()

    def _kernel(self, device):
        """The update function for a device: the fused one when its backend has fused kernels (CuPy)."""
        if "fused" in self.kernels and (device.backend or get_backend(device)).fused is not None:
            return self.kernels["fused"]
        return self.kernels.get(device.type) or self.kernels["default"]

    # --- state dict -------------------------------------------------------------------------------
    def state_dict(self):
        """``{'state': {index: {name: tensor or number}}, 'param_groups': [{..., 'params': [indices]}]}``.

        Tensors are the live state (not copies), as in PyTorch.
        """
        index = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = []
            for p in group["params"]:
                index.setdefault(id(p), len(index))
                packed["params"].append(index[id(p)])
            groups.append(packed)
        state = {index[id(p)]: dict(s) for p, s in self.state.items() if id(p) in index and s}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Load a ``state_dict()`` (of an optimizer over parameters of the same shapes, in the same order).

        State tensors are copied onto each parameter's device (floating ones in the parameter's dtype).
        """
        groups = self.param_groups
        saved_groups = state_dict["param_groups"]
        if len(groups) != len(saved_groups):
            raise ArgumentError(f"loaded state dict has a different number of parameter groups "
                                f"({len(saved_groups)} vs {len(groups)})")
        for i, (g, sg) in enumerate(zip(groups, saved_groups)):
            if len(g["params"]) != len(sg["params"]):
                raise ArgumentError(f"loaded state dict contains a parameter group that doesn't match the "
                                    f"size of optimizer's group (group {i}: {len(sg['params'])} vs "
                                    f"{len(g['params'])} parameters)")
        id_map = {}
        for g, sg in zip(groups, saved_groups):
            for p, idx in zip(g["params"], sg["params"]):
                id_map[idx] = p
        state = defaultdict(dict)
        for idx, values in state_dict["state"].items():
            key = int(idx) if not isinstance(idx, int) else idx
            if key not in id_map:
                continue
            p = id_map[key]
            state[p] = {name: _cast_state(p, name, v) for name, v in values.items()}
        self.state = state
        new_groups = []
        for g, sg in zip(groups, saved_groups):
            ng = {k: copy.deepcopy(v) for k, v in sg.items() if k != "params"}
            if "betas" in ng and isinstance(ng["betas"], list):
                ng["betas"] = tuple(ng["betas"])
            ng["params"] = g["params"]
            new_groups.append(ng)
        self.param_groups = new_groups


def _cast_state(p, name, value):
    """A private copy of a saved state value on ``p``'s device (floats in p's dtype, except 'step')."""
    if isinstance(value, Tensor):
        arr = value.array if value.device == p.device else \
            get_backend(p.device).asarray(get_backend(value.device).to_host(value.array))
        if name == "step":
            return int(np.asarray(get_backend(value.device).to_host(value.array)).reshape(()))
        if arr.dtype.kind == "f" and arr.dtype != p.array.dtype:
            arr = arr.astype(p.array.dtype)
        elif arr is value.array:
            arr = arr.copy()
        return Tensor._make(arr, p.device)
    if isinstance(value, np.ndarray):
        if name == "step":
            return int(value.reshape(()))
        return Tensor._make(get_backend(p.device).asarray(value.astype(p.array.dtype) if value.dtype.kind == "f"
                                                         else value.copy()), p.device)
    return copy.deepcopy(value)


def axpy_(xp, a, x, y):
    """``y += a * x`` in place (the one update primitive of the optimizers; fused on GPU)."""
    if a == 1:
        y += x
    elif a == -1:
        y -= x
    else:
        y += a * x
    return y


def state_tensor(p):
    """A zero-filled state Tensor shaped like parameter ``p`` (same device and dtype)."""
    arr = get_backend(p.device).empty(p.array.shape, p.array.dtype)
    arr[...] = 0
    return Tensor._make(arr, p.device)
