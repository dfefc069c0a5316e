"""Containers: Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict."""
import operator
from collections import OrderedDict

from ...errors import OpIndexError
from ..module import Module
from ..parameter import Parameter


def _index(idx, n, what):
    idx = operator.index(idx)
    if not -n <= idx < n:
        raise OpIndexError(f"index {idx} is out of range for a {what} of length {n}")
    return idx % n


class Sequential(Module):
    """Modules applied in order: ``Sequential(Linear(4, 8), ReLU(), Linear(8, 2))(x)``.

    Also ``Sequential(OrderedDict(name=module, ...))`` for named children. Supports indexing (an int gives
    the module, a slice a new Sequential), ``len``, iteration, ``append``, ``insert``, ``extend``, ``del``.
    """

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], (OrderedDict, dict)):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for idx, module in enumerate(args):
                self.add_module(str(idx), module)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return list(self._modules.values())[_index(idx, len(self), "Sequential")]

    def __setitem__(self, idx, module):
        key = list(self._modules.keys())[_index(idx, len(self), "Sequential")]
        self.add_module(key, module)

    def __delitem__(self, idx):
        keys = list(self._modules.keys())
        if isinstance(idx, slice):
            for key in keys[idx]:
                del self._modules[key]
        else:
            del self._modules[keys[_index(idx, len(self), "Sequential")]]
        if all(k.isdigit() for k in self._modules):  # keep numbering 0..n-1
            self.__dict__["_modules"] = {str(i): m for i, m in enumerate(self._modules.values())}

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __add__(self, other):
        if not isinstance(other, Sequential):
            raise TypeError(f"add operator supports only objects of Sequential class, got {type(other).__name__}")
        return Sequential(*self, *other)

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        if not isinstance(module, Module):
            raise TypeError(f"module should be of type Module, got {type(module).__name__}")
        n = len(self)
        if not -n <= index <= n:
            raise OpIndexError(f"Index out of range: {index}")
        index = index % (n + 1) if index < 0 else index
        mods = list(self._modules.values())
        mods.insert(index, module)
        self.__dict__["_modules"] = {str(i): m for i, m in enumerate(mods)}
        return self

    def pop(self, idx):
        m = self[idx]
        del self[idx]
        return m

    def forward(self, input):
        for module in self._modules.values():
            input = module(input)
        return input


class ModuleList(Module):
    """A list of modules, registered (their parameters are the owner's); no forward of its own."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[str(_index(idx, len(self), "ModuleList"))]

    def __setitem__(self, idx, module):
        self.add_module(str(_index(idx, len(self), "ModuleList")), module)

    def __delitem__(self, idx):
        mods = list(self._modules.values())
        if isinstance(idx, slice):
            del mods[idx]
        else:
            del mods[_index(idx, len(self), "ModuleList")]
        self.__dict__["_modules"] = {str(i): m for i, m in enumerate(mods)}

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __iadd__(self, modules):
        return self.extend(modules)

    def __add__(self, other):
        return ModuleList(list(self) + list(other))

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        if isinstance(modules, Module) and not isinstance(modules, (ModuleList, Sequential)):
            raise TypeError("ModuleList.extend should be called with an iterable of modules")
        for m in list(modules):
            self.append(m)
        return self

    def insert(self, index, module):
        mods = list(self._modules.values())
        mods.insert(index, module)
        self.__dict__["_modules"] = {}
        for i, m in enumerate(mods):
            self.add_module(str(i), m)

    def pop(self, idx=-1):
        m = self[idx]
        del self[idx]
        return m


class ModuleDict(Module):
    """A dict of modules by name, registered in insertion order."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def clear(self):
        self._modules.clear()

    def pop(self, key):
        m = self[key]
        del self[key]
        return m

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules):
        items = modules.items() if hasattr(modules, "items") else modules
        for key, module in items:
            self[key] = module


class ParameterList(Module):
    """A list of Parameters, registered as '0', '1', ... (plain tensors are wrapped in Parameter)."""

    def __init__(self, values=None):
        super().__init__()
        self._size = 0
        if values is not None:
            self.extend(values)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ParameterList([self[i] for i in range(len(self))[idx]])
        return self._parameters[str(_index(idx, len(self), "ParameterList"))]

    def __setitem__(self, idx, param):
        self.register_parameter(str(_index(idx, len(self), "ParameterList")), _as_param(param))

    def __len__(self):
        return self._size

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __iadd__(self, params):
        return self.extend(params)

    def append(self, value):
        self.register_parameter(str(self._size), _as_param(value))
        self._size += 1
        return self

    def extend(self, values):
        for v in values:
            self.append(v)
        return self

    def extra_repr(self):
        return "\n".join(f"({i}): Parameter containing: [{p.dtype} of size {tuple(p.shape)}]"
                         for i, p in enumerate(self))


class ParameterDict(Module):
    """A dict of Parameters by name (plain tensors are wrapped in Parameter)."""

    def __init__(self, parameters=None):
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key):
        return self._parameters[key]

    def __setitem__(self, key, value):
        self.register_parameter(key, _as_param(value))

    def __delitem__(self, key):
        del self._parameters[key]

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters)

    def __contains__(self, key):
        return key in self._parameters

    def keys(self):
        return self._parameters.keys()

    def items(self):
        return self._parameters.items()

    def values(self):
        return self._parameters.values()

    def update(self, parameters):
        items = parameters.items() if hasattr(parameters, "items") else parameters
        for k, v in items:
            self[k] = v

    def extra_repr(self):
        return "\n".join(f"({k}): Parameter containing: [{p.dtype} of size {tuple(p.shape)}]"
                         for k, p in self.items())


def _as_param(value):
    return value if isinstance(value, Parameter) or value is None else Parameter(value)
