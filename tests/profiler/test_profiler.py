"""minigrad.profiler: exact event counts and nesting on scripted code, self times, pool bytes, schedules,
DataLoader waits, threads, CUDA-event timing (with a stand-in for CuPy's events), and the cost when off."""
import threading

import numpy as np
import pytest

import minigrad as mg
import minigrad.memory as mem
import minigrad.nn as nn
from minigrad.autograd import extensions
from minigrad.profiler import ProfilerAction, _recorder, profile, record_function, schedule
from minigrad.utils.data import DataLoader, TensorDataset, dataloader as dataloader_module


def _step(x, w):
    with record_function("forward"):
        y = (x @ w).relu().sum()
    with record_function("backward"):
        y.backward()
    return y


def _tree(events):
    """(name, parent name, number of children) per event, in the order events began."""
    return [(e.name, e.parent.name if e.parent else None, len(e.children)) for e in events]


def test_events_and_nesting_are_exact_on_a_scripted_step():
    x = mg.randn(8, 4)
    w = mg.randn(4, 3, requires_grad=True)
    with profile() as prof:
        _step(x, w)
    assert _tree(prof.events()) == [
        ("forward", None, 3), ("matmul", "forward", 0), ("relu", "forward", 0), ("sum", "forward", 0),
        ("backward", None, 3), ("sum.backward", "backward", 0), ("relu.backward", "backward", 0),
        ("matmul.backward", "backward", 0)]
    kinds = [e.kind for e in prof.events()]
    assert kinds == ["user_annotation"] + ["cpu_op"] * 3 + ["user_annotation"] + ["backward"] * 3
    assert all(e.device == "cpu" for e in prof.events() if e.kind != "user_annotation")
    for e in prof.events():
        assert e.end_ns >= e.start_ns > 0
        for c in e.children:
            assert e.start_ns <= c.start_ns <= c.end_ns <= e.end_ns


def test_a_module_step_counts_every_op_once_per_call():
    model = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 2))
    x, target = mg.randn(4, 6), mg.randint(0, 2, (4,))
    with profile() as prof:
        for _ in range(3):
            nn.functional.cross_entropy(model(x), target).backward()
    names = [e.name for e in prof.events()]
    avg = {a.key: a.count for a in prof.key_averages()}
    forward = [n for n in names if not n.endswith(".backward")]
    backward = [n for n in names if n.endswith(".backward")]
    assert len(forward) == 3 * len(forward[:len(forward) // 3]) and len(backward) % 3 == 0
    assert sorted(backward[:len(backward) // 3]) == sorted(n + ".backward" for n in forward[:len(forward) // 3])
    assert sum(avg.values()) == len(names) and all(c % 3 == 0 for c in avg.values())


def test_self_time_is_total_minus_children_and_averages_add_up():
    x, w = mg.randn(16, 8), mg.randn(8, 8, requires_grad=True)
    with profile() as prof:
        for _ in range(2):
            _step(x, w)
    fwd = [e for e in prof.events() if e.name == "forward"]
    for e in fwd:
        assert e.self_cpu_time_total == pytest.approx(
            e.cpu_time_total - sum(c.cpu_time_total for c in e.children))
    avg = {a.key: a for a in prof.key_averages()}
    assert avg["forward"].count == 2 and avg["matmul.backward"].count == 2
    assert avg["matmul"].cpu_time_total == pytest.approx(sum(e.cpu_time_total for e in prof.events()
                                                             if e.name == "matmul"))
    assert avg["matmul"].cpu_time == pytest.approx(avg["matmul"].cpu_time_total / 2)
    total_self = sum(a.self_cpu_time_total for a in prof.key_averages())
    top = sum(e.cpu_time_total for e in prof.events() if e.parent is None)
    assert total_self == pytest.approx(top)         # self times partition the recorded wall time


def test_table_has_pytorchs_columns_sorted_and_limited():
    x, w = mg.randn(16, 8), mg.randn(8, 8, requires_grad=True)
    with profile(record_shapes=True) as prof:
        _step(x, w)
    text = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=3)
    lines = text.splitlines()
    for col in ("Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "# of Calls"):
        assert col in lines[1]
    assert "CUDA" not in text and "Input Shapes" not in text
    rows = lines[3:6]
    assert len(rows) == 3 and lines[6].startswith("---") and lines[7].startswith("Self CPU time total: ")
    selfs = sorted(prof.key_averages(), key=lambda a: a.self_cpu_time_total, reverse=True)[:3]
    assert [r.split()[0] for r in rows] == [a.key for a in selfs]
    shaped = prof.key_averages(group_by_input_shape=True).table(sort_by="cpu_time_total")
    assert "Input Shapes" in shaped and "[[16, 8], [8, 8]]" in shaped
    with pytest.raises(ValueError, match="cannot sort by 'self_time'"):
        prof.key_averages().table(sort_by="self_time")


def test_group_by_input_shape_separates_shapes():
    a, b = mg.randn(4, 4), mg.randn(2, 4)
    with profile(record_shapes=True) as prof:
        a.exp()
        a.exp()
        b.exp()
    assert [(x.key, x.count) for x in prof.key_averages()] == [("exp", 3)]
    by_shape = prof.key_averages(group_by_input_shape=True)
    assert sorted((str(x.input_shapes), x.count) for x in by_shape) == [("[[2, 4]]", 1), ("[[4, 4]]", 2)]


def test_profile_memory_counts_pool_bytes_per_op():
    with mem.enabled("cpu"):
        x, y = mg.randn(1000), mg.randn(1000)         # born in the pool: adopting them costs nothing
        with profile(profile_memory=True) as prof:
            with record_function("work"):
                z = x + y                              # 4000 B, one 4096 B block
                del z                                  # freed outside any op
                w = (x * y).sum()                      # 4096 B intermediate + a 512 B scalar
    ev = {e.name: e for e in prof.events()}
    assert ev["add"].allocated_bytes == ev["add"].memory_usage == 4096
    assert ev["mul"].allocated_bytes == 4096 and ev["sum"].allocated_bytes == 512
    assert ev["work"].memory_usage == sum(c.memory_usage for c in ev["work"].children) == 4096 * 2 + 512
    avg = {a.key: a for a in prof.key_averages()}
    assert avg["add"].cpu_memory_usage == 4096 and avg["work"].self_cpu_memory_usage == 0
    assert "CPU Mem" in prof.key_averages().table() and "4.00 Kb" in prof.key_averages().table()
    del w


def test_profile_memory_switches_the_cpu_pool_on_only_for_the_profile():
    assert not mem.is_enabled("cpu")
    with profile(profile_memory=True) as prof:
        assert mem.is_enabled("cpu")
        mg.randn(256, requires_grad=True).exp().sum().backward()
    assert not mem.is_enabled("cpu")
    assert sum(e.allocated_bytes for e in prof.events()) > 0


def test_nothing_is_registered_when_off_and_record_function_is_free():
    assert not extensions.state.forward and not extensions.state.backward
    with profile():
        assert extensions.state.forward and extensions.state.backward and _recorder.active() is not None
        assert dataloader_module.batch_wrappers.names() == ["profiler"]
    assert not extensions.state.forward and not extensions.state.backward
    assert _recorder.active() is None and not dataloader_module.batch_wrappers
    with record_function("outside"):          # no profile: records nothing, raises nothing
        mg.randn(3).exp()

    @record_function("decorated")
    def f(t):
        return t.exp()
    with profile() as prof:
        f(mg.randn(3))
    assert _tree(prof.events()) == [("decorated", None, 1), ("exp", "decorated", 0)]


def test_profiles_do_not_nest_and_an_exception_closes_every_range():
    with profile():
        with pytest.raises(RuntimeError, match="already recording"):
            profile().__enter__()
    class Fails(mg.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            raise RuntimeError("fails: on purpose")

    with pytest.raises(RuntimeError, match="on purpose"):
        with profile() as prof:
            with record_function("bad"):
                mg.randn(3).exp()
                Fails.apply(mg.randn(3))
    assert _tree(prof.events()) == [("bad", None, 2), ("exp", "bad", 0), ("fails", "bad", 0)]
    assert all(e.end_ns >= e.start_ns for e in prof.events())
    assert not extensions.state.forward and _recorder.active() is None


def test_dataloader_waits_are_events_with_and_without_workers():
    ds = TensorDataset(mg.arange(24).reshape(12, 2).float())
    for workers in (0, 2):
        loader = DataLoader(ds, batch_size=4, num_workers=workers)
        with profile() as prof:
            for (xb,) in loader:
                xb.sum()
        names = [e.name for e in prof.events()]
        it = "_MultiProcessIter" if workers else "_SingleProcessIter"
        waits = [e for e in prof.events() if e.kind == "dataloader"]
        assert len(waits) == 4, names                 # 3 batches, and the call that ends the epoch
        assert {e.name for e in waits} == {f"enumerate(DataLoader)#{it}.__next__"}
        assert names.count("sum") == 3 and all(e.parent is None for e in waits)


def test_each_thread_gets_its_own_track_and_stack():
    def work():
        with record_function("worker"):
            mg.randn(5).exp()
    with profile(all_threads=True) as prof:
        t = threading.Thread(target=work)
        with record_function("main"):
            t.start()
            t.join()
            mg.randn(5).neg()
    by = {e.name: e for e in prof.events()}
    assert by["main"].thread != by["worker"].thread
    assert by["exp"].parent is by["worker"] and by["neg"].parent is by["main"]
    assert by["worker"].parent is None


def test_with_stack_records_the_callers_frames_outside_minigrad():
    with profile(with_stack=True) as prof:
        mg.randn(3).exp()
    (ev,) = prof.events()
    assert ev.stack and any("test_profiler.py" in f for f in ev.stack)
    assert not any("/minigrad/" in f.split("(")[0] for f in ev.stack)


def test_schedule_actions_match_pytorchs():
    s = schedule(wait=1, warmup=1, active=2, repeat=2, skip_first=1)
    A = ProfilerAction
    assert [s(i) for i in range(11)] == [A.NONE, A.NONE, A.WARMUP, A.RECORD, A.RECORD_AND_SAVE,
                                         A.NONE, A.WARMUP, A.RECORD, A.RECORD_AND_SAVE, A.NONE, A.NONE]
    with pytest.raises(ValueError, match="active > 0"):
        schedule(wait=0, warmup=0, active=0)


def test_a_scheduled_profile_keeps_only_the_active_steps():
    saved = []
    x = mg.randn(4, 4, requires_grad=True)
    with profile(schedule=schedule(wait=1, warmup=1, active=2, repeat=2),
                 on_trace_ready=lambda p: saved.append([(e.name, e.parent.name if e.parent else None)
                                                        for e in p.events()])) as prof:
        for step in range(10):
            x.exp().sum().backward()
            prof.step()
    assert len(saved) == 2
    assert saved[0] == [("ProfilerStep#2", None), ("exp", "ProfilerStep#2"), ("sum", "ProfilerStep#2"),
                        ("sum.backward", "ProfilerStep#2"), ("exp.backward", "ProfilerStep#2"),
                        ("ProfilerStep#3", None), ("exp", "ProfilerStep#3"), ("sum", "ProfilerStep#3"),
                        ("sum.backward", "ProfilerStep#3"), ("exp.backward", "ProfilerStep#3")]
    assert [n for n, _ in saved[1] if n.startswith("Profiler")] == ["ProfilerStep#6", "ProfilerStep#7"]
    assert not extensions.state.forward


class _FakeEvent:
    """Stands in for cupy.cuda.Event: each record() is 'launched' at the next tick of a fake GPU clock."""
    clock = [0.0]

    def record(self):
        self.clock[0] += 0.25                       # milliseconds
        self.t = self.clock[0]


class _FakeCuda:
    Event = _FakeEvent
    syncs = 0

    @staticmethod
    def get_elapsed_time(a, b):
        assert _FakeCuda.syncs == 1, "events are read only after the one synchronise at the end"
        return b.t - a.t

    class Device:
        def synchronize(self):
            _FakeCuda.syncs += 1


class _FakeXp:
    cuda = _FakeCuda


def test_on_a_gpu_op_times_come_from_cuda_events_read_after_one_synchronise(monkeypatch):
    if not mg.cuda.is_available():
        pytest.skip("needs the cuda device (MINIGRAD_EMULATE_CUDA=1 emulates it)")
    monkeypatch.setattr(_recorder, "_timer_for",
                        lambda d: _recorder._CudaTimer(_FakeXp) if d.type == "cuda" else None)
    _FakeCuda.syncs = 0
    _FakeEvent.clock[0] = 0.0
    x = mg.randn(8, 8, device="cuda", requires_grad=True)
    with profile() as prof:
        x.exp().sum().backward()
    assert _FakeCuda.syncs == 1
    evs = prof.events()
    assert [e.device_ns for e in evs] == [250_000] * 4          # each op: one tick between its events
    assert [e.device_start_ns for e in evs] == [250_000, 750_000, 1_250_000, 1_750_000]
    table = prof.key_averages().table(sort_by="cuda_time_total")
    assert "Self CUDA" in table and "CUDA total" in table and "Self CUDA time total: 1.000ms" in table


def test_without_a_gpu_cuda_ops_have_host_times_only():
    if not mg.cuda.is_available():
        pytest.skip("needs the cuda device (MINIGRAD_EMULATE_CUDA=1 emulates it)")
    if mg.device("cuda").xp is not np:
        pytest.skip("a real GPU: device times are measured")
    with profile() as prof:
        mg.randn(4, device="cuda").exp()
    (ev,) = prof.events()
    assert ev.device == "cuda:0" and ev.device_ns is None and ev.cuda_time_total == 0
