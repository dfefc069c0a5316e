"""Whole objects in checkpoints (``mg.save(model, f)``), loaded only when their classes are allowed."""
import io

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.serialization import CheckpointError, add_safe_globals, clear_safe_globals, load, safe_globals, \
    save


class Config:
    def __init__(self, width):
        self.width = width
        self.tags = {"a", "b"}


class Net(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.emb = nn.Embedding(5, cfg.width)
        self.head = nn.Linear(cfg.width, 5, bias=False)
        self.head.weight = self.emb.weight          # tied, as in a GPT
        self.act = nn.functional.relu               # a function held as a value
        self.register_buffer("scale", mg.tensor(2.0))
        self.shared = self.head                     # the same module twice

    def forward(self, idx):
        return self.head(self.act(self.emb(idx)) * self.scale)


ALLOWED = [Net, Config, nn.Embedding, nn.Linear, nn.functional.relu]


def _saved(model):
    buf = io.BytesIO()
    save(model, buf)
    buf.seek(0)
    return buf


def test_a_whole_module_round_trips_with_ties_shared_modules_and_functions():
    model = Net(Config(4))
    with safe_globals(ALLOWED):
        back = load(_saved(model))
    idx = mg.tensor([0, 3, 4])
    np.testing.assert_array_equal(back(idx).detach().numpy(), model(idx).detach().numpy())
    assert type(back) is Net and back.cfg.width == 4 and back.cfg.tags == {"a", "b"}
    assert back.head.weight is back.emb.weight and isinstance(back.emb.weight, nn.Parameter)
    assert back.shared is back.head and back.act is nn.functional.relu
    assert [n for n, _ in back.named_parameters()] == [n for n, _ in model.named_parameters()]
    back(idx).sum().backward()                       # a trainable model: gradients reach the tied weight
    assert back.emb.weight.grad is not None and back.emb.weight.requires_grad


def test_classes_not_allowed_are_refused_with_the_remedy():
    buf = _saved(Net(Config(2)))
    with pytest.raises(CheckpointError, match=r"Net.*not an allowed global.*add_safe_globals\(\[Net\]\)"):
        load(buf)
    with safe_globals([Net, Config, nn.Embedding, nn.Linear]):      # the function is missing
        with pytest.raises(CheckpointError, match="relu"):
            load(io.BytesIO(buf.getvalue()))
    assert isinstance(load(io.BytesIO(buf.getvalue()), weights_only=False), Net)   # trusting the file
    try:
        add_safe_globals(ALLOWED)
        assert isinstance(load(io.BytesIO(buf.getvalue())), Net)
    finally:
        clear_safe_globals()
    with pytest.raises(CheckpointError, match="not an allowed global"):
        load(io.BytesIO(buf.getvalue()))


def test_what_cannot_be_found_by_name_is_refused_when_saving():
    model = Net(Config(2))
    model.act = lambda x: x
    with pytest.raises(CheckpointError, match=r"function at obj\.__dict__\['act'\].*lambda"):
        save(model, io.BytesIO())
    with pytest.raises(CheckpointError, match="method"):
        save({"f": model.forward}, io.BytesIO())


def test_a_tampered_object_reference_is_a_corrupt_checkpoint(tmp_path):
    import json
    import zipfile
    path = tmp_path / "m.pt"
    save({"a": Config(1)}, path)
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    meta = json.loads(members["__meta__.json"])
    meta["tree"]["items"][0][1] = {"type": "objref", "id": 7}
    members["__meta__.json"] = json.dumps(meta).encode()
    with zipfile.ZipFile(path, "w") as zf:
        for n, data in members.items():
            zf.writestr(n, data)
    with pytest.raises(CheckpointError, match="objref"):
        load(path)
