"""The sandbox on its own: limits, cleanup, and the result channel."""
import os
import zipfile

import numpy as np
import pytest

from autograder import sandbox
from autograder.sandbox import Limits, load_observation, run_child


def run(a0, source, observe="observe_square", timeout=5.0, **lim):
    return run_child(spec_file=a0.spec_file, spec_module=a0.module_name,
                     cells=[{"id": "c", "role": "graded", "source": source}],
                     jobs=[{"k": 0, "observe": observe, "params": {}, "label": ""}],
                     inputs={"0/x": np.arange(3.0)}, limits=Limits(timeout_s=timeout, **lim))


def test_observation_round_trip(a0):
    r = run(a0, "def square(x):\n    return x * x\n")
    assert r.done and r.returncode == 0 and not r.timed_out
    np.testing.assert_array_equal(r.observations[0]["y"], [0.0, 1.0, 4.0])
    assert r.sandbox["ok"] and r.cells == [{"id": "c", "role": "graded", "ok": True}]


def test_timeout_kills_the_group_quickly(a0):
    r = run(a0, "import os, time\nif os.fork() == 0:\n    time.sleep(100)\ndef square(x):\n    while True: pass\n",
            timeout=1.0)
    assert r.timed_out and r.wall_s < 5 and 0 in r.started and 0 not in r.status


def test_the_child_sees_a_scrubbed_world(a0):
    src = ("import os, sys\n"
           "def square(x):\n"
           "    env = set(os.environ)\n"
           "    ok = env <= {'PATH','HOME','TMPDIR','LANG','OPENBLAS_NUM_THREADS','OMP_NUM_THREADS',\n"
           "                 'MKL_NUM_THREADS','MPLBACKEND','MPLCONFIGDIR','LC_CTYPE'}\n"
           "    ok &= sys.stdin.read() == ''\n"
           "    ok &= 'autograder-box-' in os.getcwd() and not any('/work/main' == p for p in sys.path)\n"
           "    ok &= sys.flags.isolated == 1 and sys.flags.no_site == 1\n"
           "    return x * 0 + ok\n")
    r = run(a0, src)
    assert r.observations[0]["y"].tolist() == [1.0, 1.0, 1.0], r.status


@pytest.mark.skipif(sandbox.capabilities().landlock_abi == 0, reason="needs Landlock")
def test_landlock_blocks_listing_results_reading_repo_and_network(a0):
    from autograder.spec import ROOT
    src = (f"import os, socket\nR = []\n"
           f"for f in (lambda: os.listdir('../out'), lambda: open({str(ROOT / 'pyproject.toml')!r}).read(),\n"
           f"          lambda: open('/tmp/x-autograder', 'w'), lambda: socket.create_connection(('127.0.0.1', 22), 1)):\n"
           f"    try:\n        f(); R.append(0)\n    except OSError:\n        R.append(1)\n"
           f"def square(x):\n    return x * 0 + sum(R)\n")
    r = run(a0, src)
    assert r.observations[0]["y"].tolist() == [4.0, 4.0, 4.0]


def test_rlimits_are_applied(a0):
    src = ("import resource\n"
           "def square(x):\n"
           "    return x * 0 + [resource.getrlimit(resource.RLIMIT_AS)[1] >> 20,\n"
           "                    resource.getrlimit(resource.RLIMIT_CPU)[0],\n"
           "                    resource.getrlimit(resource.RLIMIT_FSIZE)[1] >> 20]\n")
    r = run(a0, src, timeout=4.0, memory_mb=1000, fsize_mb=7)
    assert r.observations[0]["y"].tolist() == [1000, 5, 7]


def test_rlimits_cannot_be_raised_back(a0):
    src = ("import resource\n"
           "def square(x):\n"
           "    try:\n        resource.setrlimit(resource.RLIMIT_AS, (-1, -1)); raised = 1\n"
           "    except (ValueError, OSError):\n        raised = 0\n"
           "    return x * 0 + raised\n")
    assert run(a0, src).observations[0]["y"].tolist() == [0.0, 0.0, 0.0]


def test_user_task_count():
    assert sandbox._user_tasks(os.geteuid()) >= 1


def test_load_observation_refuses_pickles_and_bombs(tmp_path):
    p = tmp_path / "o.npz"
    np.savez(p, a=np.array([object()], dtype=object))
    with pytest.raises(ValueError, match="unreadable"):
        load_observation(p, 1 << 20)
    with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as zf:     # 64 MB of zeros compress to ~64 KB
        zf.writestr("a.npy", b"\0" * (64 << 20))
    assert p.stat().st_size < 1 << 20
    with pytest.raises(ValueError, match="unpack to"):
        load_observation(p, 1 << 20)
    np.savez(p, a=np.zeros(3))
    assert load_observation(p, 1 << 20)["a"].tolist() == [0, 0, 0]


def test_capabilities_describe():
    text = sandbox.capabilities().describe()
    assert "process limit" in text
