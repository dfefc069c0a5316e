import os

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.safetensors_io import safetensors_metadata

safetensors_numpy = pytest.importorskip("safetensors.numpy")


def test_roundtrip_read_by_the_library(tmp_path):
    model = nn.Sequential(nn.Linear(4, 3), nn.LayerNorm(3), nn.Embedding(5, 3))
    sd = model.state_dict()
    sd["step_ids"] = mg.arange(4)                           # int64 and float32 side by side
    path = tmp_path / "model.safetensors"
    mg.save_safetensors(sd, path, metadata={"format": "pt", "note": "minigrad"})
    raw = safetensors_numpy.load_file(str(path))            # the library itself reads it
    assert set(raw) == set(sd)
    for k, v in sd.items():
        np.testing.assert_array_equal(raw[k], v.numpy())
        assert raw[k].dtype == v.numpy().dtype
    back = mg.load_safetensors(path)
    fresh = nn.Sequential(nn.Linear(4, 3), nn.LayerNorm(3), nn.Embedding(5, 3))
    fresh.load_state_dict({k: v for k, v in back.items() if k != "step_ids"})
    np.testing.assert_array_equal(fresh[0].weight.detach().numpy(), model[0].weight.detach().numpy())
    assert safetensors_metadata(path) == {"format": "pt", "note": "minigrad"}
    safetensors_numpy.save_file({"w": np.ones((2, 2), np.float64)}, str(tmp_path / "theirs.safetensors"))
    assert mg.load_safetensors(tmp_path / "theirs.safetensors")["w"].dtype == mg.float64


def test_errors_and_atomicity(tmp_path):
    path = tmp_path / "m.safetensors"
    mg.save_safetensors({"a": mg.ones(2)}, path)
    with pytest.raises(mg.CheckpointError, match="not a tensor"):
        mg.save_safetensors({"a": mg.ones(2), "step": 3}, path)
    assert mg.load_safetensors(path)["a"].tolist() == [1.0, 1.0]          # the old file is intact
    assert [p for p in os.listdir(tmp_path) if p.endswith(".tmp")] == []
    (tmp_path / "bad.safetensors").write_bytes(b"not a safetensors file at all")
    with pytest.raises(mg.CheckpointError, match="not a readable safetensors"):
        mg.load_safetensors(tmp_path / "bad.safetensors")
    with pytest.raises(FileNotFoundError):
        mg.load_safetensors(tmp_path / "missing.safetensors")
