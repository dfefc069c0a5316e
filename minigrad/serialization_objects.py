"""Whole objects in checkpoints -- ``mg.save(model, f)`` / ``mg.load(f)`` -- without pickle.

``serialization.py`` stores containers of tensors, arrays and plain values; this module adds what PyTorch
programs also save: a whole ``nn.Module`` (``torch.save(model, f)``), a config object, a function or a class
held as a value (``TransformerEncoderLayer.activation``). Nodes of the metadata tree
(``docs/CHECKPOINT_FORMAT.md``)::

    {"type": "object", "class": "model:RNNModel", "id": 3, "state": NODE}   attributes (vars(obj)) as a dict node
    {"type": "objref", "id": 3}                                             the same object, stored before
    {"type": "global", "name": "minigrad.ops.nn.activation:relu"}            a function or class, by import path
    {"type": "set", "items": [NODE, ...]}                                    a set (Module's non-persistent buffers)
    tensor nodes get "parameter": true for an ``nn.Parameter``

Loading rebuilds an object as ``cls.__new__(cls)`` plus its attributes (``__setstate__`` when the class
defines one): no ``__init__``, no ``__reduce__``, nothing from the file is executed. *Which* classes and
functions may be named is PyTorch's ``weights_only`` rule: by default only those the program allowed, by
passing the objects themselves, process-wide with ``add_safe_globals([...])`` or for a block with
``with safe_globals([...]):`` (per thread). ``load(..., weights_only=False)`` instead imports whatever the
file names -- importing a module runs its code, so do that only for files you trust, as with PyTorch.
"""
import contextlib
import contextvars
import importlib
import types

from .errors import CheckpointError

KINDS = ("object", "objref", "global", "set")
_process_safe = {}   # "module:qualname" -> object (add_safe_globals)
_block_safe = contextvars.ContextVar("minigrad_safe_globals", default=())


def _name(obj):
    return f"{getattr(obj, '__module__', None)}:{getattr(obj, '__qualname__', None)}"


def add_safe_globals(safe_globals):
    """Allow these classes/functions to be named by checkpoints that ``load`` reads (process-wide)."""
    for obj in safe_globals:
        if isinstance(obj, tuple):       # PyTorch also takes (object, "module.name") pairs
            obj = obj[0]
        _process_safe[_name(obj)] = obj


def get_safe_globals():
    return list(_process_safe.values()) + [obj for _, obj in _block_safe.get()]


def clear_safe_globals():
    _process_safe.clear()


@contextlib.contextmanager
def safe_globals(safe_globals):
    """``with safe_globals([RNNModel, nn.LSTM, ...]): model = mg.load(f)``: allowed inside the block."""
    objs = [o[0] if isinstance(o, tuple) else o for o in safe_globals]
    token = _block_safe.set(_block_safe.get() + tuple((_name(o), o) for o in objs))
    try:
        yield
    finally:
        _block_safe.reset(token)


# --- saving --------------------------------------------------------------------------------------------
def tensor_flags(t):
    """Extra fields of a tensor node: an ``nn.Parameter`` is marked, so it loads as one."""
    from .nn.parameter import Parameter
    return {"parameter": True} if isinstance(t, Parameter) else {}


def _importable(obj, where, label):
    """``obj``'s import path, or a clear refusal when it has none that leads back to it."""
    name = _name(obj)
    if "<locals>" in name or "<lambda>" in name or name.startswith("None:") or name.endswith(":None"):
        raise CheckpointError(f"save: cannot store {label} at {where}: {name.replace(':', '.')} cannot be found "
                              f"again by name when loading (a lambda, or defined inside a function); define "
                              f"it at module level")
    return name


def encode(encoder, obj, where):
    """The node for ``obj`` (called by the encoder for anything that is not a plain value or container)."""
    if isinstance(obj, (set, frozenset)):
        return {"type": "set", "items": [encoder.encode(v, f"{where}{{}}") for v in obj]}
    if isinstance(obj, (type, types.FunctionType, types.BuiltinFunctionType)):
        return {"type": "global", "name": _importable(obj, where, type(obj).__name__)}
    if isinstance(obj, (types.MethodType, types.ModuleType)) or not hasattr(obj, "__dict__"):
        raise CheckpointError(f"save: cannot store {type(obj).__name__} at {where}: checkpoints hold tensors, "
                              f"arrays, numbers, strings, containers of them, and objects with attributes "
                              f"(a Module, a config)")
    seen = encoder.objects.get(id(obj))
    if seen is not None:
        return {"type": "objref", "id": seen[0]}
    oid = len(encoder.objects)
    encoder.objects[id(obj)] = (oid, obj)        # holding obj keeps its id unique while saving
    cls = _importable(type(obj), where, type(obj).__name__)
    custom = getattr(type(obj), "__getstate__", None)
    state = obj.__getstate__() if custom not in (None, getattr(object, "__getstate__", None)) else vars(obj)
    return {"type": "object", "class": cls, "id": oid, "state": encoder.encode(state, f"{where}.__dict__")}


# --- loading -------------------------------------------------------------------------------------------
def restore_tensor(decoder, t, node):
    """A loaded tensor node as a Parameter when it was saved as one."""
    if node.get("parameter") is not True:
        return t
    from .nn.parameter import Parameter
    return Parameter(t, requires_grad=t.requires_grad)


def _resolve(decoder, name, what):
    if not isinstance(name, str) or name.count(":") != 1:
        decoder.fail(f"bad {what} name {name!r}")
    allowed = dict(_process_safe)
    allowed.update(_block_safe.get())
    if name in allowed:
        return allowed[name]
    module, qualname = name.split(":")
    if decoder.weights_only:
        short = qualname.rpartition(".")[2]
        raise CheckpointError(
            f"load: {decoder.name} holds {what} {module}.{qualname}, which is not an allowed global "
            f"(weights_only=True loads only the classes and functions you allow). If you trust this file, "
            f"allow it with mg.serialization.add_safe_globals([{short}]) or in a block, "
            f"with mg.serialization.safe_globals([{short}]): ..., or load with weights_only=False "
            f"(imports {module} by name, running its code)")
    try:
        obj = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as e:
        raise CheckpointError(f"load: {decoder.name} names {what} {module}.{qualname}, which cannot be "
                              f"imported here ({e})") from e
    return obj


def decode(decoder, node, depth):
    kind = node["type"]
    if kind == "set":
        items = node.get("items")
        if not isinstance(items, list):
            decoder.fail("set node without an items list")
        return {decoder.decode(v, depth + 1) for v in items}
    if kind == "global":
        return _resolve(decoder, node.get("name"), "the global")
    key = ("object", node.get("id"))
    if kind == "objref":
        if key not in decoder.objects:
            decoder.fail(f"objref to object {node.get('id')!r}, which was not stored before")
        return decoder.objects[key]
    cls = _resolve(decoder, node.get("class"), "an object of class")
    if not isinstance(cls, type):
        decoder.fail(f"{node.get('class')!r} is not a class")
    if key in decoder.objects:
        decoder.fail(f"object id {node.get('id')!r} stored twice")
    try:
        obj = cls.__new__(cls)
    except TypeError as e:
        raise CheckpointError(f"load: {decoder.name}: cannot create a {cls.__name__} without arguments "
                              f"({e})") from e
    decoder.objects[key] = obj           # before its state: the state may refer back to it
    state = decoder.decode(node.get("state"), depth + 1)
    if getattr(cls, "__setstate__", None) is not None:
        obj.__setstate__(state)
    elif isinstance(state, dict):
        obj.__dict__.update(state)
    else:
        decoder.fail(f"the state of a {cls.__name__} object is not a dict")
    return obj
