"""``mg.save`` / ``mg.load``: checkpoints of state dicts in a documented, pickle-free format.

What can be saved: nested dicts (``str``/``int``/``float``/``bool``/``None`` keys), lists and tuples of
tensors, NumPy arrays and NumPy scalars, and plain ``str``/``int``/``float``/``bool``/``None`` values (and
minigrad dtypes) -- a model's ``state_dict()``, an optimizer's, an epoch counter, a config -- and whole
objects (a Module, a config object, a function held as a value: ``serialization_objects.py``, which loads
them only when their classes are allowed, PyTorch's ``weights_only`` rule). Anything else (a lambda, a
bound method, an object without attributes) is refused when saving, with the path to it.

Format, version 1 (see ``docs/CHECKPOINT_FORMAT.md``). A checkpoint is a ZIP archive, i.e. a NumPy
``.npz`` file, holding:

* ``__meta__.json``: UTF-8 JSON, written first::

      {"format": "minigrad.checkpoint", "version": 1, "minigrad_version": "0.1.0",
       "arrays": {"t0": {"dtype": "float32", "shape": [4, 3]}, ...},
       "tree": NODE}

* ``t0.npy``, ``t1.npy``, ...: one array per tensor/array, in NumPy's ``.npy`` format (never an object
  array, so never pickled data).

``NODE`` is a JSON object tagged by ``"type"``:

==========================  ===============================================================================
``dict``, ``ordereddict``   ``{"type": "dict", "items": [[KEY_NODE, NODE], ...]}`` (keys are nodes too)
``list``, ``tuple``         ``{"type": "list", "items": [NODE, ...]}``
``tensor``                  ``{"type": "tensor", "ref": "t0", "dtype": "float32", "device": "cpu",
                            "requires_grad": false}``
``ndarray``, ``npscalar``   ``{"type": "ndarray", "ref": "t1"}`` (a NumPy scalar is stored as a 0-d array)
``str``, ``int``, ``bool``  ``{"type": "int", "value": 3}``
``float``                   ``{"type": "float", "value": 0.5}``; non-finite values as ``"nan"``, ``"inf"``,
                            ``"-inf"``
``none``                    ``{"type": "none"}``
``dtype``                   ``{"type": "dtype", "value": "float32"}``
==========================  ===============================================================================

A tensor (or array) that appears several times in ``obj`` (tied weights) is stored once; every place
that referred to it refers to one ``ref``, and loading gives one object back for all of them.

Safety and robustness:

* ``load`` reads with ``np.load(..., allow_pickle=False)`` and parses the metadata as JSON: loading an
  untrusted file can never run code. A pickle (e.g. a ``torch.save`` file), random bytes, a truncated or
  corrupted archive (ZIP CRC-32 checks every member), a plain ``.npz`` without ``__meta__.json``, a
  metadata tree that does not match the arrays, or a newer format version all raise ``CheckpointError``.
* ``save`` to a path is atomic: it writes a temporary file in the same directory, flushes and fsyncs it,
  then ``os.replace``s it over the destination (and fsyncs the directory). A crash or an exception
  half-way leaves the previous checkpoint untouched and no temporary file behind.
"""
import collections
import json
import math
import os
import struct
import tempfile
import zipfile
import zlib

import numpy as np

from ._version import __version__
from .backend import dtypes as _dtypes
from . import serialization_objects as _objects
from .backend.device import Device, device as _device
from .errors import CheckpointError, DeviceError, MinigradError
from .serialization_objects import add_safe_globals, clear_safe_globals, get_safe_globals, safe_globals
from .tensor import Tensor, tensor

__all__ = ["save", "load", "load_metadata", "CheckpointError", "FORMAT_NAME", "FORMAT_VERSION", "add_safe_globals",
           "clear_safe_globals", "get_safe_globals", "safe_globals"]

FORMAT_NAME = "minigrad.checkpoint"
FORMAT_VERSION = 1
META_NAME = "__meta__.json"

# --- saving --------------------------------------------------------------------------------------------
class _Encoder:
    def __init__(self):
        self.arrays = {}     # ref -> host ndarray
        self.array_meta = {}  # ref -> {"dtype", "shape"}
        self._refs = {}      # id(obj) -> ref, to store shared tensors once
        self._keep = []      # keep encoded objects alive so their ids stay unique
        self.objects = {}    # id(obj) -> (object id, obj): whole objects (serialization_objects.py)

    def _add_array(self, obj, array):
        ref = self._refs.get(id(obj))
        if ref is None:
            if array.dtype.hasobject or array.dtype.kind == "V":
                raise CheckpointError(f"save: arrays of dtype {array.dtype} cannot be stored (object and "
                                      f"structured arrays are not supported)")
            ref = f"t{len(self.arrays)}"
            self._refs[id(obj)] = ref
            self._keep.append(obj)
            self.arrays[ref] = array
            self.array_meta[ref] = {"dtype": array.dtype.str, "shape": list(array.shape)}
        return ref

    def encode(self, obj, where):
        if obj is None:
            return {"type": "none"}
        if isinstance(obj, bool):
            return {"type": "bool", "value": obj}
        if isinstance(obj, int):
            return {"type": "int", "value": int(obj)}
        if isinstance(obj, float):
            value = float(obj)
            return {"type": "float", "value": value if math.isfinite(value) else repr(value)}
        if isinstance(obj, str):
            return {"type": "str", "value": obj}
        if isinstance(obj, Tensor):
            host = obj.array if obj.device.type == "cpu" and isinstance(obj.array, np.ndarray) else np.asarray(obj)
            if obj.dtype is _dtypes.bfloat16:   # .npy has no bfloat16: its bits, as uint16 (PyTorch's own trick)
                host = host.view(np.uint16)
            return {"type": "tensor", "ref": self._add_array(obj, host), "dtype": obj.dtype.name,
                    "device": str(obj.device), "requires_grad": bool(obj.requires_grad),
                    **_objects.tensor_flags(obj)}
        if isinstance(obj, np.ndarray):
            if obj.dtype.hasobject or obj.dtype.kind == "V":
                raise CheckpointError(f"save: {where} is a NumPy array of dtype {obj.dtype}; object and "
                                      f"structured arrays cannot be stored (they would need pickle)")
            return {"type": "ndarray", "ref": self._add_array(obj, obj)}
        if isinstance(obj, np.generic):
            if obj.dtype.hasobject or obj.dtype.kind == "V":
                raise CheckpointError(f"save: {where} is a NumPy object scalar; it cannot be stored")
            return {"type": "npscalar", "ref": self._add_array(obj, np.asarray(obj))}
        if isinstance(obj, _dtypes.DType):
            return {"type": "dtype", "value": obj.name}
        if isinstance(obj, dict):
            kind = "ordereddict" if isinstance(obj, collections.OrderedDict) else "dict"
            items = []
            for k, v in obj.items():
                if not (k is None or isinstance(k, (str, int, float, bool))):
                    raise CheckpointError(f"save: dict key {k!r} at {where} has type {type(k).__name__}; keys "
                                          f"must be str, int, float, bool or None")
                items.append([self.encode(k, where), self.encode(v, f"{where}[{k!r}]")])
            return {"type": kind, "items": items}
        if isinstance(obj, (list, tuple)):
            kind = "tuple" if isinstance(obj, tuple) else "list"
            return {"type": kind, "items": [self.encode(v, f"{where}[{i}]") for i, v in enumerate(obj)]}
        return _objects.encode(self, obj, where)   # a Module, a config object, a function, a set


def _write_array(zf, name, array):
    with zf.open(name, "w", force_zip64=True) as member:
        np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=False)


def _write_archive(fileobj, meta_bytes, arrays, compress):
    compression = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    with zipfile.ZipFile(fileobj, mode="w", compression=compression, allowZip64=True) as zf:
        zf.writestr(META_NAME, meta_bytes)
        for ref, array in arrays.items():
            _write_array(zf, ref + ".npy", array)


def _new_file_mode(path):
    """The permissions a plain open(path, 'w') would give: the existing file's, or 0o666 less the umask."""
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        pass
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except OSError:
        pass
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


def _fsync_dir(directory):
    if os.name != "posix":
        return
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def save(obj, f, *, compress=False):
    """Save ``obj`` (a state dict, or nested containers of tensors/arrays/numbers/strings) to ``f``.

    ``f`` is a path (written atomically: temporary file, fsync, ``os.replace``) or a writable binary file
    object (written as is). ``compress=True`` deflates the arrays (smaller, slower). The file is exactly
    at ``f``: no ``.npz`` suffix is added.
    """
    enc = _Encoder()
    try:
        tree = enc.encode(obj, "obj")
    except RecursionError:
        raise CheckpointError("save: the object is nested too deeply to store") from None
    meta = {"format": FORMAT_NAME, "version": FORMAT_VERSION, "minigrad_version": __version__,
            "arrays": enc.array_meta, "tree": tree}
    try:
        meta_bytes = json.dumps(meta, allow_nan=False, separators=(",", ":")).encode("utf-8")
    except RecursionError:
        raise CheckpointError("save: the object is nested too deeply to store") from None

    if hasattr(f, "write"):
        _write_archive(f, meta_bytes, enc.arrays, compress)
        return

    atomic_write(f, lambda fh: _write_archive(fh, meta_bytes, enc.arrays, compress))


def atomic_write(f, write):
    """Call ``write(fileobj)`` on a temporary file beside path ``f``, fsync it and ``os.replace`` it over
    ``f``: a crash half-way leaves the previous file untouched (used by ``save`` and ``save_safetensors``)."""
    path = os.path.realpath(os.fspath(f))
    directory = os.path.dirname(path)
    mode = _new_file_mode(path)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(directory)


# --- loading -------------------------------------------------------------------------------------------
# What reading a damaged archive can raise (zipfile, zlib, the .npy parser, allocation of a bogus size).
_READ_ERRORS = (ValueError, OSError, EOFError, KeyError, IndexError, TypeError, NotImplementedError,
                OverflowError, MemoryError, RecursionError, struct.error, zlib.error, zipfile.BadZipFile,
                zipfile.LargeZipFile)
_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")


def _describe_foreign(head):
    if not head:
        return "the file is empty"
    if head[:1] == b"\x80" or head[:1] in (b"(", b"]", b"}"):
        return "it looks like a pickle (e.g. a torch.save file); pickles are never loaded, they can run code"
    if head.startswith(b"\x93NUMPY"):
        return "it is a single NumPy .npy array, not a checkpoint archive"
    return f"it is not a ZIP/.npz archive (it starts with {head[:8]!r})"


def _read_head(f):
    if hasattr(f, "read"):
        pos = f.tell()
        head = f.read(8)
        f.seek(pos)
        return head
    with open(os.fspath(f), "rb") as fh:
        return fh.read(8)


class _Decoder:
    def __init__(self, npz, array_meta, name, device):
        self.npz = npz
        self.array_meta = array_meta
        self.name = name
        self.device = device
        self._arrays = {}
        self.objects = {}        # decoded tensors and whole objects, by ref / id (shared ones load once)
        self.weights_only = True

    def fail(self, msg):
        raise CheckpointError(f"load: {self.name}: corrupt checkpoint metadata: {msg}")

    def _check_header(self, ref, member):
        """Compare the member's .npy header with the metadata before reading any data, so a corrupt
        header cannot make us allocate or parse garbage."""
        want = self.array_meta[ref]
        try:
            shape, dtype = tuple(want["shape"]), np.dtype(want["dtype"])
            expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        except (TypeError, KeyError, ValueError) as e:
            self.fail(f"bad entry for array {ref!r} ({e})")
        zf = self.npz.zip
        info = zf.getinfo(member)
        with zf.open(info) as fp:
            version = np.lib.format.read_magic(fp)
            if version == (1, 0):
                h_shape, _, h_dtype = np.lib.format.read_array_header_1_0(fp)
            elif version == (2, 0):
                h_shape, _, h_dtype = np.lib.format.read_array_header_2_0(fp)
            else:
                raise ValueError(f"unsupported .npy version {version}")
        if tuple(h_shape) != shape or h_dtype != dtype:
            raise CheckpointError(f"load: {self.name}: array {ref!r} has shape {list(h_shape)} and dtype "
                                  f"{h_dtype}, but the metadata says {list(shape)} and {dtype} (corrupt "
                                  f"checkpoint)")
        if info.file_size < expected:
            raise CheckpointError(f"load: {self.name}: array {ref!r} is truncated ({info.file_size} bytes "
                                  f"for {expected} bytes of data)")

    def array(self, ref):
        if ref in self._arrays:
            return self._arrays[ref]
        if not isinstance(ref, str) or ref not in self.array_meta:
            self.fail(f"reference {ref!r} names no array")
        member = ref + ".npy"
        if member not in self.npz.zip.namelist():
            raise CheckpointError(f"load: {self.name}: array {ref!r} is missing from the archive "
                                  f"(truncated or corrupt checkpoint)")
        try:
            self._check_header(ref, member)
            arr = self.npz[ref]
        except CheckpointError:
            raise
        except _READ_ERRORS as e:
            raise CheckpointError(f"load: {self.name}: array {ref!r} cannot be read ({type(e).__name__}: {e}); "
                                  f"the checkpoint is corrupt or truncated, or holds pickled data (never "
                                  f"loaded)") from e
        if not isinstance(arr, np.ndarray):
            raise CheckpointError(f"load: {self.name}: member {ref!r} is not a .npy array")
        self._arrays[ref] = arr
        return arr

    def _tensor(self, node):
        ref = node.get("ref")
        key = ("tensor", ref)
        if key in self.objects:
            return self.objects[key]
        arr = self.array(ref)
        try:
            dtype = _dtypes.to_dtype(node["dtype"])
        except Exception:
            self.fail(f"unknown tensor dtype {node.get('dtype')!r}")
        if dtype is _dtypes.bfloat16 and arr.dtype == np.uint16:
            arr = arr.view(dtype.np_dtype)
        if dtype.np_dtype != arr.dtype:
            self.fail(f"tensor {ref!r} is stored as {arr.dtype} but described as {dtype.name}")
        dev = self.device if self.device is not None else node.get("device", "cpu")
        try:
            t = tensor(arr, dtype=dtype, device=dev)
        except DeviceError as e:
            raise DeviceError(f"load: {self.name}: the checkpoint has tensors on {dev}, which is not usable "
                              f"here ({e}); pass device='cpu' to load them elsewhere") from e
        if node.get("requires_grad") is True and dtype.is_floating_point:
            t.requires_grad_(True)
        t = _objects.restore_tensor(self, t, node)
        self.objects[key] = t
        return t

    def decode(self, node, depth=0):
        if depth > 1000:
            self.fail("nesting deeper than 1000 levels")
        if not isinstance(node, dict) or "type" not in node:
            self.fail(f"expected a tagged node, got {type(node).__name__}")
        kind = node["type"]
        if kind == "none":
            return None
        if kind in ("bool", "int", "str"):
            value = node.get("value")
            expected = {"bool": bool, "int": int, "str": str}[kind]
            if type(value) is not expected:
                self.fail(f"{kind} node holds {value!r}")
            return value
        if kind == "float":
            value = node.get("value")
            if isinstance(value, str) and value in ("nan", "inf", "-inf"):
                return float(value)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                self.fail(f"float node holds {value!r}")
            return float(value)
        if kind == "tensor":
            return self._tensor(node)
        if kind == "ndarray":
            return self.array(node.get("ref"))
        if kind == "npscalar":
            arr = self.array(node.get("ref"))
            if arr.shape != ():
                self.fail(f"npscalar {node.get('ref')!r} is not 0-dimensional")
            return arr[()]
        if kind == "dtype":
            try:
                return _dtypes.to_dtype(node.get("value"))
            except Exception:
                self.fail(f"unknown dtype {node.get('value')!r}")
        if kind in ("list", "tuple"):
            items = node.get("items")
            if not isinstance(items, list):
                self.fail(f"{kind} node without an items list")
            out = [self.decode(v, depth + 1) for v in items]
            return tuple(out) if kind == "tuple" else out
        if kind in ("dict", "ordereddict"):
            items = node.get("items")
            if not isinstance(items, list) or not all(isinstance(p, list) and len(p) == 2 for p in items):
                self.fail(f"{kind} node without a list of [key, value] pairs")
            out = collections.OrderedDict() if kind == "ordereddict" else {}
            for k, v in items:
                key = self.decode(k, depth + 1)
                if not (key is None or isinstance(key, (str, int, float, bool))):
                    self.fail(f"dict key of type {type(key).__name__}")
                out[key] = self.decode(v, depth + 1)
            return out
        if kind in _objects.KINDS:
            return _objects.decode(self, node, depth)
        self.fail(f"unknown node type {kind!r}")


def _open_npz(f, name):
    try:
        head = _read_head(f)
    except FileNotFoundError:
        raise
    except OSError as e:
        raise CheckpointError(f"load: cannot read {name}: {e}") from e
    if not head.startswith(_ZIP_MAGICS):
        raise CheckpointError(f"load: {name} is not a minigrad checkpoint: {_describe_foreign(head)}")
    try:
        npz = np.load(f, allow_pickle=False)
    except _READ_ERRORS as e:
        raise CheckpointError(f"load: {name} is truncated or corrupt (not a readable ZIP archive: {e})") from e
    if not isinstance(npz, np.lib.npyio.NpzFile):
        raise CheckpointError(f"load: {name} is not a minigrad checkpoint archive")
    return npz


def _read_meta(npz, name):
    if META_NAME not in npz.files:
        raise CheckpointError(f"load: {name} is not a minigrad checkpoint: it has no {META_NAME} "
                              f"(a plain NumPy .npz? load it with numpy.load)")
    try:
        raw = npz[META_NAME]
        if not isinstance(raw, bytes):
            raise ValueError("metadata is not a JSON document")
        meta = json.loads(raw.decode("utf-8"))
    except _READ_ERRORS as e:
        raise CheckpointError(f"load: {name}: the checkpoint metadata cannot be read ({e}); the file is "
                              f"corrupt or truncated") from e
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
        fmt = meta.get("format") if isinstance(meta, dict) else None
        raise CheckpointError(f"load: {name} is not a minigrad checkpoint (format {fmt!r}, expected "
                              f"{FORMAT_NAME!r})")
    version = meta.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise CheckpointError(f"load: {name}: bad format version {version!r}")
    if version > FORMAT_VERSION:
        raise CheckpointError(f"load: {name} was written in checkpoint format version {version}, newer than "
                              f"this minigrad reads ({FORMAT_VERSION}); upgrade minigrad")
    if not isinstance(meta.get("arrays"), dict) or "tree" not in meta:
        raise CheckpointError(f"load: {name}: corrupt checkpoint metadata: missing 'arrays' or 'tree'")
    return meta


def _name_of(f):
    return repr(getattr(f, "name", "<file object>")) if hasattr(f, "read") else repr(os.fspath(f))


def load_metadata(f):
    """The parsed ``__meta__.json`` of a checkpoint (format, version, arrays, tree), without its arrays."""
    name = _name_of(f)
    npz = _open_npz(f, name)
    with npz:
        return _read_meta(npz, name)


def load(f, *, device=None, map_location=None, weights_only=True):
    """Load what ``save`` stored in ``f`` (a path or a readable binary file object).

    Tensors come back on the device they were saved from, or on ``device`` (``map_location`` is accepted
    as PyTorch's name for it), with their dtype and ``requires_grad``. Never runs code from the file:
    a pickle, a foreign, truncated or corrupt file raises ``CheckpointError``. Whole objects (a saved
    Module) load only if their classes are allowed (``add_safe_globals``/``safe_globals``, as PyTorch's
    ``weights_only=True``, the default); ``weights_only=False`` imports any class the file names.
    """
    if device is not None and map_location is not None:
        raise CheckpointError("load: pass device or map_location, not both")
    device = device if device is not None else map_location
    if device is not None and not isinstance(device, (str, Device)):
        raise CheckpointError(f"load: device must be a device or a string like 'cpu', got {device!r} "
                              f"(callable map_location is not supported)")
    name = _name_of(f)
    npz = _open_npz(f, name)
    with npz:
        meta = _read_meta(npz, name)
        decoder = _Decoder(npz, meta["arrays"], name, _device(device) if device is not None else None)
        decoder.weights_only = bool(weights_only)
        try:
            return decoder.decode(meta["tree"])
        except RecursionError as e:
            raise CheckpointError(f"load: {name}: corrupt checkpoint metadata (nested too deeply)") from e
