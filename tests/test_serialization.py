"""mg.save / mg.load: round trips, atomic writes, damaged and foreign files, and never unpickling."""
import collections
import io
import json
import math
import os
import pickle
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minigrad as mg
from minigrad import serialization
from minigrad.errors import MinigradError
from minigrad.serialization import CheckpointError, load, load_metadata, save

ALL_DTYPES = [mg.float16, mg.float32, mg.float64, mg.int8, mg.uint8, mg.int16, mg.int32, mg.int64, mg.bool]


def _random_tensor(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == mg.bool:
        arr = rng.random(shape) > 0.5
    elif dtype.is_floating_point:
        arr = rng.standard_normal(shape).astype(dtype.np_dtype)
    else:
        info = np.iinfo(dtype.np_dtype)
        arr = rng.integers(info.min, info.max, size=shape, dtype=dtype.np_dtype, endpoint=True)
    return mg.tensor(arr)


def _assert_same(a, b):
    """Deep equality with types, dtypes and devices (NaN equals NaN)."""
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, mg.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape and a.device == b.device
        assert a.requires_grad == b.requires_grad
        np.testing.assert_array_equal(np.asarray(a.detach()), np.asarray(b.detach()))
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    elif isinstance(a, np.generic):
        assert a.dtype == b.dtype and (a == b or (a != a and b != b))
    elif isinstance(a, dict):
        assert list(a.keys()) == list(b.keys())
        for k in a:
            _assert_same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _assert_same(x, y)
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b)
    else:
        assert a == b


# --- round trips ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("shape", [(), (0,), (5,), (3, 4), (2, 0, 3), (2, 3, 4, 5)])
def test_tensor_round_trip_every_dtype_and_shape(tmp_path, dtype, shape):
    t = _random_tensor(dtype, shape)
    save({"t": t}, tmp_path / "ck.npz")
    out = load(tmp_path / "ck.npz")["t"]
    _assert_same(t, out)


def test_nested_state_dict_round_trip(tmp_path):
    w = mg.randn(4, 3)
    state = {
        "model": collections.OrderedDict([("fc.weight", w), ("fc.bias", mg.zeros(4)),
                                          ("bn.num_batches_tracked", mg.tensor(7))]),
        "optimizer": {"state": {0: {"step": 10, "exp_avg": mg.ones(4, 3, dtype=mg.float64)}, 1: {}},
                      "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "nesterov": False,
                                        "maximize": None, "params": [0, 1]}]},
        "epoch": 3, "best": float("inf"), "worst": -float("inf"), "undefined": float("nan"),
        "name": "tiny-gpt ✓ ünïcode", "big": 2**70, "neg": -5, "flag": True, "nothing": None,
        "numpy": np.arange(6, dtype=np.uint16).reshape(2, 3), "fortran": np.asfortranarray(np.ones((3, 2))),
        "strided": np.arange(20.0)[::3], "complex": np.array([1 + 2j], dtype=np.complex64),
        "strings": np.array(["ab", "c"]), "np_scalar": np.float32(2.5), "np_int": np.int64(-3),
        "dtype": mg.float16, "empty": {}, "empty_list": [], "tuple": (1, (2, [3])),
        "keys": {1.5: "f", None: 0, False: 1},
    }
    save(state, tmp_path / "ck.npz")
    out = load(tmp_path / "ck.npz")
    _assert_same(state, out)
    assert isinstance(out["model"], collections.OrderedDict)
    assert out["optimizer"]["param_groups"][0]["betas"] == (0.9, 0.999)


def test_shared_tensors_stay_shared(tmp_path):
    w = mg.randn(3, 3)
    save({"encoder.embed": w, "decoder.head": w, "arr": [np.zeros(2)] * 2}, tmp_path / "ck.npz")
    assert len(load_metadata(tmp_path / "ck.npz")["arrays"]) == 2  # stored once each
    out = load(tmp_path / "ck.npz")
    assert out["encoder.embed"] is out["decoder.head"]
    assert out["arr"][0] is out["arr"][1]


def test_loaded_tensors_are_independent_copies_with_requires_grad(tmp_path):
    p = mg.randn(3, requires_grad=True)
    save({"p": p}, tmp_path / "ck.npz")
    out = load(tmp_path / "ck.npz")["p"]
    assert out.requires_grad and out.is_leaf
    np.testing.assert_array_equal(out.detach().numpy(), p.detach().numpy())
    with mg.no_grad():
        p.array[...] = 0
    assert np.abs(out.detach().numpy()).sum() > 0


def test_file_objects(tmp_path):
    buf = io.BytesIO()
    save({"x": mg.arange(5)}, buf)
    buf.seek(0)
    assert load(buf)["x"].tolist() == [0, 1, 2, 3, 4]
    with open(tmp_path / "f.ckpt", "wb") as f:
        save([1, "a"], f)
    with open(tmp_path / "f.ckpt", "rb") as f:
        assert load(f) == [1, "a"]


def test_exact_path_no_suffix_and_compression(tmp_path):
    big = {"w": mg.zeros(256, 256)}
    save(big, tmp_path / "model.ckpt")
    save(big, tmp_path / "small.ckpt", compress=True)
    assert sorted(os.listdir(tmp_path)) == ["model.ckpt", "small.ckpt"]
    assert os.path.getsize(tmp_path / "small.ckpt") < os.path.getsize(tmp_path / "model.ckpt") / 10
    _assert_same(load(tmp_path / "small.ckpt"), big)


def test_format_is_a_documented_npz(tmp_path):
    save({"w": mg.ones(2, 2), "step": 4}, tmp_path / "ck.npz")
    with zipfile.ZipFile(tmp_path / "ck.npz") as zf:
        assert zf.namelist() == ["__meta__.json", "t0.npy"]
        meta = json.loads(zf.read("__meta__.json"))
    assert meta["format"] == "minigrad.checkpoint" and meta["version"] == 1
    assert meta["arrays"] == {"t0": {"dtype": "<f4", "shape": [2, 2]}}
    with np.load(tmp_path / "ck.npz", allow_pickle=False) as npz:  # plain NumPy reads the arrays too
        np.testing.assert_array_equal(npz["t0"], np.ones((2, 2), np.float32))
    assert load_metadata(tmp_path / "ck.npz")["tree"]["type"] == "dict"
    assert os.path.exists(os.path.join(os.path.dirname(__file__), "..", "docs", "CHECKPOINT_FORMAT.md"))


def test_device_argument(tmp_path, device):
    t = mg.randn(3, device=device)
    save({"t": t}, tmp_path / "ck.npz")
    assert load(tmp_path / "ck.npz")["t"].device == device
    out = load(tmp_path / "ck.npz", device="cpu")["t"]
    assert out.device == mg.device("cpu")
    np.testing.assert_array_equal(np.asarray(out), np.asarray(t))
    assert load(tmp_path / "ck.npz", map_location="cpu")["t"].device == mg.device("cpu")


# property: whatever nested structure of supported leaves, load(save(x)) == x
_leaves = st.one_of(
    st.none(), st.booleans(), st.integers(-2**80, 2**80), st.floats(allow_nan=True), st.text(max_size=8),
    st.sampled_from(ALL_DTYPES).flatmap(
        lambda d: st.tuples(st.integers(0, 3), st.integers(0, 3)).map(lambda s: _random_tensor(d, s))),
)
_keys = st.one_of(st.text(max_size=6), st.integers(-5, 5))
_trees = st.recursive(_leaves, lambda kids: st.one_of(st.lists(kids, max_size=4),
                                                      st.lists(kids, max_size=3).map(tuple),
                                                      st.dictionaries(_keys, kids, max_size=4)), max_leaves=12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_trees)
def test_round_trip_property(tree):
    buf = io.BytesIO()
    save(tree, buf)
    buf.seek(0)
    _assert_same(tree, load(buf))


# --- what cannot be saved -------------------------------------------------------------------------------
def test_unsupported_objects_are_refused_with_their_path(tmp_path):
    class Model:
        def state_dict(self):
            return {}

    with pytest.raises(CheckpointError, match=r"Model at obj\['net'\].*inside a function"):
        save({"net": Model()}, tmp_path / "ck.npz")
    with pytest.raises(CheckpointError, match=r"function at obj\['cfg'\]\[1\]"):
        save({"cfg": [1, lambda: 0]}, tmp_path / "ck.npz")
    deep = []
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(CheckpointError, match="deeply"):
        save(deep, tmp_path / "ck.npz")
    with pytest.raises(CheckpointError, match="object"):
        save({"a": np.array([object()])}, tmp_path / "ck.npz")
    with pytest.raises(CheckpointError, match="key"):
        save({(1, 2): 3}, tmp_path / "ck.npz")
    assert os.listdir(tmp_path) == []  # nothing written, not even a temporary file


# --- atomic writes --------------------------------------------------------------------------------------
def _old_checkpoint(tmp_path):
    path = tmp_path / "ck.npz"
    save({"w": mg.ones(100), "epoch": 1}, path)
    return path, path.read_bytes()


@pytest.mark.parametrize("exc", [RuntimeError("disk on fire"), KeyboardInterrupt()])
def test_crash_mid_write_keeps_the_old_checkpoint(tmp_path, monkeypatch, exc):
    path, before = _old_checkpoint(tmp_path)
    real, calls = serialization._write_array, []

    def crash_after_first_array(zf, name, array):
        calls.append(name)
        if len(calls) == 2:
            raise exc
        real(zf, name, array)

    monkeypatch.setattr(serialization, "_write_array", crash_after_first_array)
    with pytest.raises(type(exc)):
        save({"a": mg.zeros(1000), "b": mg.zeros(1000), "epoch": 2}, path)
    assert calls == ["t0.npy", "t1.npy"]
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["ck.npz"]  # the temporary file is gone
    assert load(path)["epoch"] == 1


def test_crash_at_replace_keeps_the_old_checkpoint(tmp_path, monkeypatch):
    path, before = _old_checkpoint(tmp_path)

    def no_replace(src, dst):
        raise OSError("simulated power cut")

    monkeypatch.setattr(serialization.os, "replace", no_replace)
    with pytest.raises(OSError, match="power cut"):
        save({"epoch": 2}, path)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["ck.npz"]


def test_failed_first_save_leaves_nothing(tmp_path, monkeypatch):
    def boom(zf, name, array):
        raise RuntimeError("boom")

    monkeypatch.setattr(serialization, "_write_array", boom)
    with pytest.raises(RuntimeError):
        save({"w": mg.ones(3)}, tmp_path / "new.npz")
    assert os.listdir(tmp_path) == []


def test_save_is_fsynced_and_replaced(tmp_path, monkeypatch):
    synced, replaced = [], []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(serialization.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    monkeypatch.setattr(serialization.os, "replace", lambda a, b: (replaced.append((a, b)), real_replace(a, b))[1])
    save({"w": mg.ones(3)}, tmp_path / "ck.npz")
    assert synced and len(replaced) == 1
    src, dst = replaced[0]
    assert os.path.dirname(src) == str(tmp_path) and dst == str(tmp_path / "ck.npz")


def test_overwrite_and_file_mode(tmp_path):
    path = tmp_path / "ck.npz"
    save({"v": 1}, path)
    umask = os.umask(0)
    os.umask(umask)
    assert (os.stat(path).st_mode & 0o777) == (0o666 & ~umask)
    os.chmod(path, 0o640)
    save({"v": 2}, path)
    assert load(path) == {"v": 2} and (os.stat(path).st_mode & 0o777) == 0o640


# --- damaged, foreign and malicious files ---------------------------------------------------------------
@pytest.fixture
def good_bytes(tmp_path):
    path = tmp_path / "good.npz"
    save({"w": mg.randn(8, 8), "b": mg.arange(8), "meta": {"epoch": 3, "name": "x"}}, path)
    return path.read_bytes()


def _load_bytes(tmp_path, data, name="bad.npz"):
    p = tmp_path / name
    p.write_bytes(data)
    return load(p)


def test_random_bytes_and_empty_file(tmp_path):
    rng = np.random.default_rng(0)
    with pytest.raises(CheckpointError, match="not a minigrad checkpoint"):
        _load_bytes(tmp_path, rng.integers(0, 256, 4096, dtype=np.uint8).tobytes())
    with pytest.raises(CheckpointError, match="empty"):
        _load_bytes(tmp_path, b"")
    with pytest.raises(CheckpointError):  # zip magic, garbage after it
        _load_bytes(tmp_path, b"PK\x03\x04" + rng.integers(0, 256, 500, dtype=np.uint8).tobytes())
    assert issubclass(CheckpointError, MinigradError) and issubclass(CheckpointError, ValueError)


def test_missing_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        load(tmp_path / "nope.npz")


def test_every_truncation_is_detected(tmp_path, good_bytes):
    cuts = sorted(set(range(0, len(good_bytes), 7)) | {len(good_bytes) - 1, len(good_bytes) - 22})
    for cut in cuts:
        with pytest.raises(CheckpointError):
            _load_bytes(tmp_path, good_bytes[:cut])


def test_byte_flips_raise_checkpoint_error_or_change_nothing(tmp_path, good_bytes):
    """A flipped byte is caught (CRC-32, header and metadata checks) unless it sits in a field that does not
    affect the contents (e.g. a timestamp): never a wrong value, never another exception type."""
    expected = _load_bytes(tmp_path, good_bytes)
    detected = 0
    for pos in range(0, len(good_bytes), 3):
        data = bytearray(good_bytes)
        data[pos] ^= 0x5A
        try:
            out = _load_bytes(tmp_path, bytes(data))
        except CheckpointError:
            detected += 1
        else:
            _assert_same(expected, out)
    assert detected > 0.8 * len(range(0, len(good_bytes), 3))  # the rest: timestamps, flags, attributes


def test_plain_npz_without_metadata(tmp_path):
    np.savez(tmp_path / "plain.npz", a=np.arange(3))
    with pytest.raises(CheckpointError, match=r"no __meta__\.json.*plain NumPy"):
        load(tmp_path / "plain.npz")
    np.save(tmp_path / "single.npy", np.arange(3))
    with pytest.raises(CheckpointError, match="single NumPy .npy"):
        load(tmp_path / "single.npy")
    with zipfile.ZipFile(tmp_path / "other.zip", "w") as zf:
        zf.writestr("readme.txt", "hello")
    with pytest.raises(CheckpointError, match="not a minigrad checkpoint"):
        load(tmp_path / "other.zip")


class _Evil:
    """Unpickling this would create the marker file: the test proves it never happens."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_pickle_disguised_as_npz_is_never_unpickled(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "model.npz"
    path.write_bytes(pickle.dumps({"w": _Evil(str(marker))}))
    with pytest.raises(CheckpointError, match="pickle"):
        load(path)
    assert not marker.exists()


def _checkpoint_with(tmp_path, meta, members):
    path = tmp_path / "crafted.npz"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("__meta__.json", json.dumps(meta))
        for name, arr in members.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, arr, allow_pickle=True)
            zf.writestr(name, buf.getvalue())
    return path


def _meta(tree, arrays):
    return {"format": "minigrad.checkpoint", "version": 1, "arrays": arrays, "tree": tree}


def test_object_array_with_pickle_inside_is_never_unpickled(tmp_path):
    marker = tmp_path / "pwned"
    evil = np.empty(1, dtype=object)
    evil[0] = _Evil(str(marker))
    meta = _meta({"type": "ndarray", "ref": "t0"}, {"t0": {"dtype": "|O", "shape": [1]}})
    path = _checkpoint_with(tmp_path, meta, {"t0.npy": evil})
    with pytest.raises(CheckpointError, match="pickled data"):
        load(path)
    assert not marker.exists()


@pytest.mark.parametrize("meta, match", [
    ({"format": "something.else", "version": 1, "arrays": {}, "tree": {"type": "none"}}, "not a minigrad"),
    ({"format": "minigrad.checkpoint", "version": 99, "arrays": {}, "tree": {"type": "none"}}, "newer"),
    ({"format": "minigrad.checkpoint", "version": 1}, "missing"),
    (_meta({"type": "tensor", "ref": "t9", "dtype": "float32"}, {}), "names no array"),
    (_meta({"type": "ndarray", "ref": "t1"}, {"t1": {"dtype": "<f4", "shape": [2]}}), "missing from the archive"),
    (_meta({"type": "ndarray", "ref": "t0"}, {"t0": {"dtype": "<f4", "shape": [3]}}), "metadata says"),
    (_meta({"type": "ndarray", "ref": "t0"}, {"t0": {"dtype": "<i8", "shape": [2]}}), "metadata says"),
    (_meta({"type": "tensor", "ref": "t0", "dtype": "int64"}, {"t0": {"dtype": "<f4", "shape": [2]}}),
     "described"),
    (_meta({"type": "weird"}, {}), "unknown node type"),
    (_meta({"type": "int", "value": "7"}, {}), "int node"),
    (_meta({"type": "dict", "items": [[{"type": "int", "value": 1}]]}, {}), "pairs"),
    (_meta([1, 2], {}), "tagged node"),
])
def test_bad_metadata(tmp_path, meta, match):
    path = _checkpoint_with(tmp_path, meta, {"t0.npy": np.zeros(2, np.float32)})
    with pytest.raises(CheckpointError, match=match):
        load(path)


def test_metadata_that_is_not_json(tmp_path):
    path = tmp_path / "x.npz"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("__meta__.json", b"\x80\x04not json")
    with pytest.raises(CheckpointError, match="metadata cannot be read"):
        load(path)


def test_deeply_nested_metadata_is_an_error_not_a_crash(tmp_path):
    n = 1500
    tree = '{"type":"list","items":[' * n + '{"type":"none"}' + "]}" * n
    meta = '{"format":"minigrad.checkpoint","version":1,"arrays":{},"tree":%s}' % tree
    for i, text in enumerate([meta, "[" * 100000 + "]" * 100000]):
        path = tmp_path / f"deep{i}.npz"
        with zipfile.ZipFile(path, "w") as zf:
            zf.writestr("__meta__.json", text)
        with pytest.raises(CheckpointError):
            load(path)
