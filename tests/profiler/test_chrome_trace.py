"""export_chrome_trace writes valid Trace Event JSON: required keys per phase, one track per thread, and
complete events that nest (every pair on a track is either disjoint or one inside the other)."""
import json
import threading

import minigrad as mg
from minigrad.profiler import _recorder, profile, record_function
from minigrad.utils.data import DataLoader, TensorDataset

from test_profiler import _FakeCuda, _FakeEvent, _FakeXp

REQUIRED = {"X": {"name", "ph", "ts", "dur", "pid", "tid", "cat", "args"}, "M": {"name", "ph", "pid", "args"}}


def validate(trace):
    """The checks a Trace Event consumer relies on; returns {(pid, tid): [X events]}."""
    assert set(trace) >= {"traceEvents"} and isinstance(trace["traceEvents"], list)
    tracks = {}
    for e in trace["traceEvents"]:
        assert e["ph"] in REQUIRED, e
        missing = REQUIRED[e["ph"]] - set(e)
        assert not missing, (missing, e)
        assert isinstance(e["pid"], int) and isinstance(e.get("tid", 0), int)
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "thread_name") and isinstance(e["args"]["name"], str)
            continue
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0 and e["dur"] >= 0
        tracks.setdefault((e["pid"], e["tid"]), []).append(e)
    for events in tracks.values():         # balanced: sorted by start, each lies inside every open one
        open_ends = []
        for e in sorted(events, key=lambda e: (e["ts"], -e["dur"])):
            while open_ends and e["ts"] >= open_ends[-1]:
                open_ends.pop()
            end = e["ts"] + e["dur"]
            assert not open_ends or end <= open_ends[-1] + 1e-3, ("overlapping ranges", e)
            open_ends.append(end)
    named = {(e["pid"], e["tid"]) for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
    assert set(tracks) <= named, "every track is named"
    return tracks


def test_a_training_step_exports_nested_tracks(tmp_path):
    model = mg.nn.Linear(4, 3)
    loader = DataLoader(TensorDataset(mg.randn(8, 4)), batch_size=4)

    def side():
        with record_function("side thread"):
            mg.randn(3).exp()

    with profile(record_shapes=True, profile_memory=True, all_threads=True) as prof:
        for (xb,) in loader:
            with record_function("forward"):
                loss = model(xb).sum()
            with record_function("backward"):
                loss.backward()
        t = threading.Thread(target=side)
        t.start()
        t.join()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    tracks = validate(trace)
    assert len(tracks) == 2                               # main thread, side thread
    xs = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(xs) == len(prof.events())
    assert {e["cat"] for e in xs} == {"cpu_op", "user_annotation", "dataloader"}
    mm = next(e for e in xs if e["name"] == "linear" or e["name"] == "matmul")
    assert mm["args"]["Device"] == "cpu" and mm["args"]["Input Dims"][0] == [4, 4]
    fwd = [e for e in xs if e["name"] == "forward"][0]
    inside = [e for e in xs if e["tid"] == fwd["tid"] and fwd["ts"] <= e["ts"] and
              e["ts"] + e["dur"] <= fwd["ts"] + fwd["dur"] and e is not fwd]
    assert inside and all(e["cat"] == "cpu_op" for e in inside)


def test_gpu_times_get_a_device_track(tmp_path, monkeypatch):
    if not mg.cuda.is_available():
        import pytest
        pytest.skip("needs the cuda device (MINIGRAD_EMULATE_CUDA=1 emulates it)")
    monkeypatch.setattr(_recorder, "_timer_for",
                        lambda d: _recorder._CudaTimer(_FakeXp) if d.type == "cuda" else None)
    _FakeCuda.syncs, _FakeEvent.clock[0] = 0, 0.0
    with profile() as prof:
        mg.randn(4, device="cuda").exp().neg()
    prof.export_chrome_trace(str(tmp_path / "t.json"))
    trace = json.loads((tmp_path / "t.json").read_text())
    tracks = validate(trace)
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    assert [(e["name"], e["ts"], e["dur"]) for e in kernels] == [("exp", 250.0, 250.0), ("neg", 750.0, 250.0)]
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"}
    assert "cuda:0" in names and len(tracks) == 2


def test_an_empty_profile_is_still_a_valid_trace(tmp_path):
    with profile() as prof:
        pass
    prof.export_chrome_trace(str(tmp_path / "empty.json"))
    assert validate(json.loads((tmp_path / "empty.json").read_text())) == {}
