"""Module: the base class of every layer and model, as in PyTorch.

Assigning a ``Parameter`` or a ``Module`` to an attribute registers it; ``register_buffer`` registers state
that is not learned (BatchNorm's running statistics). From these registries come ``parameters()``,
``state_dict()``, ``to(device)``, ``train()/eval()`` and the repr tree::

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(4, 8)
            self.fc2 = nn.Linear(8, 2)

        def forward(self, x):
            return self.fc2(self.fc1(x).relu())

``module(x)`` runs the forward pre-hooks, ``forward`` and the forward hooks.
"""
import itertools
from collections import OrderedDict

from ..autograd import grad_mode
from ..autograd.grads import zero_grad
from ..backend import dtypes
from ..backend.device import Device, ToShortcuts, device as _device
from ..errors import ArgumentError, DTypeError
from ..tensor import Tensor
from .parameter import Parameter
from .state_dict import StateDictMixin


class RemovableHandle:
    """Returned by ``register_*_hook``; ``handle.remove()`` (or leaving a ``with`` block) unregisters."""
    _next_id = itertools.count()

    def __init__(self, hooks_dict, *extra_dicts):
        self.id = next(RemovableHandle._next_id)
        self._dicts = (hooks_dict,) + extra_dicts

    def remove(self):
        for d in self._dicts:
            d.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
        return False


def _addindent(text, n):
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    return lines[0] + "\n" + "\n".join(" " * n + line for line in lines[1:])


class Module(StateDictMixin, ToShortcuts):
    """Base class of layers and models: subclass it, build children in ``__init__``, define ``forward``."""

    training: bool

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments")
        s = object.__setattr__
        s(self, "training", True)
        s(self, "_parameters", {})
        s(self, "_buffers", {})
        s(self, "_non_persistent_buffers_set", set())
        s(self, "_modules", {})
        s(self, "_forward_pre_hooks", OrderedDict())
        s(self, "_forward_pre_hooks_with_kwargs", {})
        s(self, "_forward_hooks", OrderedDict())
        s(self, "_forward_hooks_with_kwargs", {})

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    # --- calling ----------------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        if not (self._forward_pre_hooks or self._forward_hooks):
            return self.forward(*args, **kwargs)
        return self._call_with_hooks(args, kwargs)

    def _call_with_hooks(self, args, kwargs):
        for hid, hook in list(self._forward_pre_hooks.items()):
            if hid in self._forward_pre_hooks_with_kwargs:
                res = hook(self, args, kwargs)
                if res is not None:
                    if not (isinstance(res, tuple) and len(res) == 2):
                        raise TypeError("forward pre-hook registered with with_kwargs=True must return "
                                        "None or a tuple (args, kwargs)")
                    args, kwargs = res
            else:
                res = hook(self, args)
                if res is not None:
                    args = res if isinstance(res, tuple) else (res,)
        out = self.forward(*args, **kwargs)
        for hid, hook in list(self._forward_hooks.items()):
            if hid in self._forward_hooks_with_kwargs:
                res = hook(self, args, kwargs, out)
            else:
                res = hook(self, args, out)
            if res is not None:
                out = res
        return out

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """``hook(module, args) -> None | new args`` (``hook(module, args, kwargs) -> None | (args, kwargs)``
        with ``with_kwargs=True``), called before ``forward``."""
        handle = RemovableHandle(self._forward_pre_hooks, self._forward_pre_hooks_with_kwargs)
        self._forward_pre_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[handle.id] = True
        if prepend:
            self._forward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False):
        """``hook(module, args, output) -> None | new output`` (``hook(module, args, kwargs, output)`` with
        ``with_kwargs=True``), called after ``forward``."""
        handle = RemovableHandle(self._forward_hooks, self._forward_hooks_with_kwargs)
        self._forward_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_hooks_with_kwargs[handle.id] = True
        if prepend:
            self._forward_hooks.move_to_end(handle.id, last=False)
        return handle

    # --- attribute registration -------------------------------------------------------------------
    def __getattr__(self, name):
        # only called when normal lookup fails: look in the registries
        d = self.__dict__
        for reg in ("_parameters", "_buffers", "_modules"):
            r = d.get(reg)
            if r is not None and name in r:
                return r[name]
        if "_parameters" not in d:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}' "
                                 f"(did you forget to call super().__init__() in {type(self).__name__}?)")
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._remove_from(name, keep="_parameters")
            self.register_parameter(name, value)
            return
        if params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                f"(mg.nn.Parameter or None expected)")
            params[name] = None
            return
        if isinstance(value, Module):
            if "_modules" not in d:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._remove_from(name, keep="_modules")
            d["_modules"][name] = value
            return
        modules = d.get("_modules")
        if modules is not None and name in modules:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}' "
                                f"(mg.nn.Module or None expected)")
            modules[name] = None
            return
        buffers = d.get("_buffers")
        if buffers is not None and name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                f"(mg.Tensor or None expected)")
            buffers[name] = value
            return
        object.__setattr__(self, name, value)

    def _remove_from(self, name, keep):
        d = self.__dict__
        d.pop(name, None)
        for reg in ("_parameters", "_buffers", "_modules"):
            if reg != keep:
                r = d.get(reg)
                if r is not None:
                    r.pop(name, None)
        if keep != "_buffers":
            d["_non_persistent_buffers_set"].discard(name)

    def __delattr__(self, name):
        for reg in ("_parameters", "_buffers", "_modules"):
            r = self.__dict__.get(reg)
            if r is not None and name in r:
                del r[name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers) | set(self._modules))

    @staticmethod
    def _check_name(name, what):
        if not isinstance(name, str):
            raise TypeError(f"{what} name should be a string, got {type(name).__name__}")
        if name == "" or "." in name:
            raise KeyError(f"{what} name can't be empty or contain \".\", got {name!r}")

    def register_parameter(self, name, param):
        """Register ``param`` (a Parameter, or None for an absent optional one) under ``name``."""
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        self._check_name(name, "parameter")
        if name in self.__dict__ and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                            f"(mg.nn.Parameter or None required)")
        if param is not None and param.grad_fn is not None:
            raise ArgumentError(f"cannot assign non-leaf tensor to parameter '{name}': a parameter must be a "
                                f"leaf (wrap a detached tensor: nn.Parameter(t.detach()))")
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """Register non-learned state (a Tensor or None). Persistent buffers are part of ``state_dict``."""
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        self._check_name(name, "buffer")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                            f"(mg.Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        """Register a child module (or None) under ``name``; same as assigning the attribute."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._check_name(name, "module")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    def get_submodule(self, target):
        """``model.get_submodule('encoder.layers.0')``."""
        mod = self
        if target == "":
            return mod
        for item in target.split("."):
            if item not in mod._modules or mod._modules[item] is None:
                raise AttributeError(f"{type(mod).__name__} has no submodule '{item}' (looking up '{target}')")
            mod = mod._modules[item]
        return mod

    def get_parameter(self, target):
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._parameters:
            raise AttributeError(f"{type(mod).__name__} has no parameter '{name}'")
        return mod._parameters[name]

    def get_buffer(self, target):
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._buffers:
            raise AttributeError(f"{type(mod).__name__} has no buffer '{name}'")
        return mod._buffers[name]

    # --- iteration --------------------------------------------------------------------------------
    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """(dotted name, module) for this module and every descendant, depth first, each once."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, mod in self._modules.items():
            if mod is None:
                continue
            yield from mod.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, mod in self._modules.items():
            if mod is not None and id(mod) not in seen:
                seen.add(id(mod))
                yield name, mod

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, registry, prefix, recurse, remove_duplicate):
        seen = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse \
            else [(prefix, self)]
        for mod_prefix, mod in mods:
            for name, value in getattr(mod, registry).items():
                if value is None:
                    continue
                if remove_duplicate:
                    if id(value) in seen:
                        continue
                    seen.add(id(value))
                yield mod_prefix + ("." if mod_prefix else "") + name, value

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """(dotted name, Parameter) pairs; a parameter shared by two modules is listed once."""
        return self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        return self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def num_parameters(self, trainable_only=False):
        """Total number of parameter elements (each shared parameter counted once)."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad or not trainable_only)

    # --- modes and gradients ----------------------------------------------------------------------
    def train(self, mode=True):
        """Set training mode (dropout active, batch norm uses and updates batch statistics)."""
        if not isinstance(mode, bool):
            raise ArgumentError("training mode is expected to be a bool")
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        """Reset every parameter's ``.grad`` (to None by default, else to zeros in place)."""
        zero_grad(self.parameters(), set_to_none)

    def apply(self, fn):
        """Call ``fn(module)`` on every child (recursively), then on self; returns self."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # --- device and dtype -------------------------------------------------------------------------
    def _apply(self, fn):
        """Replace the storage of every parameter, gradient and buffer by ``fn(tensor)``'s, in place.

        The Parameter/buffer objects stay the same (optimizers keep working); their version counters
        are bumped.
        """
        with grad_mode.no_grad():
            for m in self.modules():
                for t in list(m._parameters.values()) + list(m._buffers.values()):
                    if t is None:
                        continue
                    _swap_storage(t, fn(t))
                    if t.grad is not None:
                        _swap_storage(t.grad, fn(t.grad))
        return self

    def to(self, *args, **kwargs):
        """``to(device)``, ``to(dtype)``, ``to(device, dtype)``, ``to(tensor)``: move/cast in place.

        A dtype applies to floating-point parameters and buffers only (integer buffers such as
        ``num_batches_tracked`` keep theirs), as in PyTorch.
        """
        dev = kwargs.pop("device", None)
        dtype = kwargs.pop("dtype", None)
        kwargs.pop("non_blocking", None)
        if kwargs:
            raise TypeError(f"to(): unexpected arguments {sorted(kwargs)}")
        for a in args:
            if isinstance(a, Tensor):
                dev, dtype = a.device, a.dtype
            elif isinstance(a, Device) or (isinstance(a, int) and not isinstance(a, bool)) or \
                    (isinstance(a, str) and a not in dtypes._BY_NAME):
                dev = a
            else:
                dtype = a
        if dev is not None:
            dev = _device(dev)
        if dtype is not None:
            dtype = dtypes.to_dtype(dtype)
            if not dtype.is_floating_point:
                raise DTypeError(f"Module.to only accepts floating point dtypes, got {dtype}")

        def convert(t):
            out = t
            if dev is not None and out.device != dev:
                out = out.to(dev)
            if dtype is not None and out.is_floating_point() and out.dtype is not dtype:
                out = out.to(dtype)
            return out
        return self._apply(convert)

    def type(self, dst_type):
        return self.to(dst_type)

    # --- repr -------------------------------------------------------------------------------------
    def extra_repr(self):
        """Override to show a layer's settings inside its repr, e.g. ``in_features=4, out_features=2``."""
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        lines = []
        extra = self.extra_repr()
        if extra:
            lines.extend(extra.split("\n"))
        for name, mod in self._modules.items():
            lines.append(f"({name}): " + _addindent(repr(mod), 2))
        main = self._get_name() + "("
        if lines:
            if len(lines) == 1 and not self._modules:
                main += lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"


def _swap_storage(t, new):
    if new is t:
        return
    t.array = new.array
    t.device = new.device
    t._version_counter.bump()
