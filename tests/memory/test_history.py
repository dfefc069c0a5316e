"""Memory history: events with their cause, snapshots, and timeline plots."""
import json

import numpy as np
import pytest

import minigrad.memory as mem
from minigrad.backend import device, get_backend
from minigrad.memory import KiB, MiB
from minigrad.memory.history import MemoryHistory
from minigrad.memory.plot import BEFORE, timeline


def _storage():
    return get_backend(device("cpu")).allocator


def test_events_record_op_label_and_running_totals(fresh_cpu_pool):
    be = get_backend(device("cpu"))
    mem.record_memory_history(True)
    with mem.label("forward"):
        _storage().current_op = "matmul"          # what Function.apply sets around forward
        a = be.empty((256,), np.float32)          # 1 KiB
        _storage().current_op = None
        b = be.adopt(np.ones(100))                # 800 B -> 1 KiB, no op: the label is the cause
    c = be.empty((10,), np.float32)               # neither
    del a
    events = mem.snapshot()["events"]
    assert [e["action"] for e in events] == ["segment_alloc", "alloc", "alloc", "alloc", "free"]
    assert [e["seq"] for e in events] == list(range(5))
    assert all(e2["time"] >= e1["time"] for e1, e2 in zip(events, events[1:]))
    seg, ea, eb, ec, fa = events
    assert seg["size"] == 2 * MiB and seg["reserved_bytes"] == 2 * MiB and seg["pool"] == "small_pool"
    assert (ea["op"], ea["label"], ea["cause"], ea["size"], ea["requested"]) == \
        ("matmul", "forward", "matmul", KiB, KiB)
    assert (eb["op"], eb["label"], eb["cause"], eb["requested"]) == (None, "forward", "forward", 800)
    assert (ec["op"], ec["label"], ec["cause"]) == (None, None, "unlabelled")
    assert ea["address"] == fa["address"] and fa["cause"] == "matmul" and fa["label"] == "forward"
    assert [e["allocated_bytes"] for e in events] == [0, KiB, 2 * KiB, 2 * KiB + 512, KiB + 512]
    del b, c


def test_snapshot_is_json_and_describes_every_block(fresh_cpu_pool):
    be = get_backend(device("cpu"))
    mem.record_memory_history(True)
    _storage().current_op = "relu"
    keep = [be.empty((n,), np.float64) for n in (100, 2000, 300_000)]
    _storage().current_op = None
    snap = json.loads(json.dumps(mem.snapshot()))           # survives a JSON round trip unchanged
    assert snap == mem.snapshot()
    assert snap["device"] == "cpu" and snap["recording"] is True
    assert snap["stats"]["allocated_bytes.all.current"] == mem.memory_allocated()
    assert sum(s["size"] for s in snap["segments"]) == mem.memory_reserved() == 22 * MiB
    for seg in snap["segments"]:
        assert sum(b["size"] for b in seg["blocks"]) == seg["size"]
        assert [b["offset"] for b in seg["blocks"]] == sorted(b["offset"] for b in seg["blocks"])
    live = [b for s in snap["segments"] for b in s["blocks"] if b["state"] == "active_allocated"]
    assert sorted(b["requested"] for b in live) == [800, 16000, 2_400_000]
    assert {b["cause"] for b in live} == {"relu"}
    del keep


def test_recording_off_stops_and_restart_starts_fresh(fresh_cpu_pool):
    be = get_backend(device("cpu"))
    mem.record_memory_history(True)
    x = be.empty((4,), np.float32)
    mem.record_memory_history(False)
    assert mem.snapshot()["events"] == [] and mem.snapshot()["recording"] is False
    y = be.empty((4,), np.float32)
    mem.record_memory_history(True, max_entries=3)
    for _ in range(5):
        be.empty((4,), np.float32)                           # alloc + free each
    events = mem.snapshot()["events"]
    assert len(events) == 3 and events[-1]["seq"] == 9       # the oldest are dropped
    del x, y


def test_oom_is_recorded(sim):
    sim.history = MemoryHistory()
    sim.memory_limit = 2 * MiB
    sim.malloc(KiB)
    with pytest.raises(mem.OutOfMemoryError):
        sim.malloc(2 * MiB)
    assert [e["action"] for e in sim.history.events] == ["segment_alloc", "alloc", "oom"]


def _training_like_history(be):
    """Parameters before recording, then a 'forward' and a 'backward' with a few ops."""
    params = [be.empty((256, 256), np.float32) for _ in range(2)]          # 256 KiB each
    mem.record_memory_history(True)
    acts = []
    with mem.label("forward"):
        for op in ("linear", "relu", "linear"):
            _storage().current_op = op
            acts.append(be.empty((64, 1024), np.float32))               # 256 KiB each
        _storage().current_op = None
    with mem.label("backward"):
        _storage().current_op = "linear.backward"
        grads = [be.empty((256, 256), np.float32) for _ in range(2)]
        _storage().current_op = None
        del acts[:]
    del params[0]                                                        # allocated before recording
    return params, grads


def test_timeline_bands_add_up_to_allocated(fresh_cpu_pool):
    be = get_backend(device("cpu"))
    keep = _training_like_history(be)
    snap = mem.snapshot()
    x, series, reserved = timeline(snap, by="op")
    events = snap["events"]
    for i, e in enumerate(events):
        assert sum(band[i] for band in series.values()) == e["allocated_bytes"]
        assert reserved[i] == e["reserved_bytes"]
    assert series[BEFORE][0] == 512 * KiB and series[BEFORE][-1] == 256 * KiB
    assert max(series["linear"]) == 512 * KiB and series["linear"][-1] == 0
    assert series["linear.backward"][-1] == 512 * KiB
    _, by_label, _ = timeline(snap, by="label")
    assert max(by_label["forward"]) == 768 * KiB and by_label["backward"][-1] == 512 * KiB
    _, by_tensor, _ = timeline(snap, by="tensor", top=2)
    assert len([g for g in by_tensor if g.startswith("#")]) == 2 and "(other)" in by_tensor
    del keep


@pytest.mark.parametrize("by", ["op", "label", "tensor"])
def test_plot_timeline_writes_a_png(fresh_cpu_pool, tmp_path, by):
    be = get_backend(device("cpu"))
    keep = _training_like_history(be)
    path = tmp_path / f"timeline_{by}.png"
    ax = mem.plot_timeline(by=by, path=str(path))
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    labels = ax.get_legend_handles_labels()[1]
    assert "reserved" in labels
    if by == "op":
        assert {"linear", "relu", "linear.backward", BEFORE} <= set(labels)
    del keep


def test_plot_timeline_from_a_saved_snapshot_and_on_given_axes(fresh_cpu_pool, tmp_path):
    from matplotlib.figure import Figure
    be = get_backend(device("cpu"))
    keep = _training_like_history(be)
    mem.save_snapshot(tmp_path / "snap.json")
    snap = json.loads((tmp_path / "snap.json").read_text())
    ax = Figure().add_subplot()
    assert mem.plot_timeline(snap, ax=ax) is ax
    assert len(ax.collections) >= 4                           # one filled band per cause
    with pytest.raises(ValueError, match="by must be"):
        mem.plot_timeline(snap, by="colour")
    del keep
