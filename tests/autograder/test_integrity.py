"""The pieces of the grader's integrity, one by one (the hostile corpus in test_hostile_course.py tries them
together on the real assignments): stubs in the child's minigrad copy, the integrity guard, the memory meter,
and the static scan's new routes."""
import shutil
import subprocess
import sys
import types

import numpy as np
import pytest

from autograder import stubs
from autograder._guard import Guard, IntegrityError, MeasurementError, meter
from autograder.forbidden import INTEGRITY, forbidden_uses
from autograder.runtime import minigrad_dir


def test_a_public_name_is_stubbed_where_it_is_defined():
    t = stubs.resolve("minigrad.optim.AdamW")
    assert (t.file, t.qualname) == ("optim/adam.py", "AdamW")
    assert stubs.resolve("minigrad.amp.GradScaler.unscale_").qualname == "GradScaler.unscale_"
    assert stubs.resolve("minigrad.utils.checkpoint").qualname == ""
    with pytest.raises(ValueError, match="has no 'Nope'"):
        stubs.resolve("minigrad.optim.Nope")


def test_a_stub_keeps_the_name_and_loses_the_code():
    src = ("import threading\n\nclass _Local(threading.local):\n    x = None\n\n_local = _Local()\n\n"
           "def answer(a, b):\n    '''Doc.'''\n    return a * b + 42\n\nclass Op:\n    name = 'op'\n\n"
           "    @staticmethod\n    def forward(ctx, x):\n        return x * 2\n")
    out = stubs.stub_source(src, [stubs.Target("m.py", "", "minigrad.m")])
    assert "42" not in out and "x * 2" not in out and 'Doc.' in out and "name = 'op'" in out
    assert "class _Local(threading.local):\n    x = None" in out, "what the module's own top level uses stays"
    assert out.count("refuse('minigrad.m.") == 3     # answer, Op.forward, Op.__init__


def test_the_childs_minigrad_raises_the_students_error_by_every_route(tmp_path):
    shutil.copytree(minigrad_dir(), tmp_path / "minigrad", ignore=shutil.ignore_patterns("__pycache__", "tests"))
    stubs.apply(tmp_path / "minigrad", ["minigrad.optim.adam"])
    code = ("import operator, minigrad as mg\n"
            "p = mg.tensor([1.0], requires_grad=True)\n"
            "for make in (lambda: mg.optim.AdamW([p]), lambda: operator.attrgetter('optim.adam.Adam')(mg)([p]),\n"
            "             lambda: __import__('minigrad.optim.adam', fromlist=['x']).adam_update):\n"
            "    try:\n        make()(None) if False else make()\n    except Exception as e:\n"
            "        print(type(e).__name__, str(e).split(':')[0])\n")
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    lines = p.stdout.strip().splitlines()
    assert lines[:2] == ["StudentWrittenError `minigrad.optim.adam.AdamW.__init__` is what this assignment asks you to "
                         "write yourself", "StudentWrittenError `minigrad.optim.adam.Adam.__init__` is what this "
                         "assignment asks you to write yourself"], p.stdout + p.stderr
    assert "return" not in (tmp_path / "minigrad" / "optim" / "adam.py").read_text().split("def adam_update")[1][:300]


def test_the_guard_names_what_was_replaced():
    mod = types.ModuleType("autograder._integrity_probe")
    mod.f = lambda: 1
    mod.C = type("C", (), {"m": lambda self: 1, "__module__": "autograder._integrity_probe"})
    sys.modules[mod.__name__] = mod
    try:
        g = Guard()
        g.armed = True
        g.watch_module(mod.__name__, mod)
        assert g.check() == []
        mod.f, mod.C.m = (lambda: 2), (lambda self: 2)
        assert sorted(g.check()) == ["autograder._integrity_probe.C.m", "autograder._integrity_probe.f"]
        assert "your code replaced `autograder._integrity_probe.C.m`" in g.describe(sorted(g.check()))
    finally:
        del sys.modules[mod.__name__]


def test_the_meter_measures_and_refuses_a_restarted_trace():
    import _tracemalloc
    with meter() as m:
        a = np.ones(1 << 18)
        del a
    assert m.peak >= 8 << 18 and m.current < 8 << 18
    with pytest.raises(MeasurementError, match="stopped, cleared or restarted"):
        with meter():
            _tracemalloc.stop()
            _tracemalloc.start()
    assert issubclass(MeasurementError, IntegrityError)


@pytest.mark.parametrize("src, written", [
    ("x = __import__('minigrad').memory.CachingAllocator", "minigrad.memory"),
    ("import operator\nx = operator.attrgetter('memory.allocator')(mg)", "minigrad.memory"),
    ("import sys\nx = sys.modules.get('minigrad.memory')", "minigrad.memory"),
    ("x = getattr(mg, 'memory').CachingAllocator", "minigrad.memory"),
    ("from autograder.assignments.a3_training_loop import expected_lrs", "autograder"),
    ("import sys\nf = sys._getframe(1)", "sys._getframe"),
    ("try:\n    1 / 0\nexcept Exception as e:\n    f = e.__traceback__.tb_frame.f_back", "e.__traceback__.tb_frame.f_back"),
    ("import gc\nrefs = gc.get_referrers(mg)", "gc.get_referrers"),
    ("def f():\n    pass\ncells = f.__closure__", "f.__closure__"),
])
def test_the_scan_follows_calls_and_refuses_the_graders_state(src, written):
    found = forbidden_uses(src, ["minigrad.memory", *INTEGRITY], "import minigrad as mg\n")
    assert found and found[0].written == written, found
