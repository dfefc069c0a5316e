"""A rank that dies, or never starts: the other rank gets a clear DistTimeoutError within the timeout."""
import pytest

from dist_jobs import launch, needs_mpi, results

pytestmark = [pytest.mark.mpi, needs_mpi]
TIMEOUT = 3.0  # as in workers/faults.py


def test_a_killed_rank_is_named_by_the_survivor(tmp_path):
    proc = launch("faults.py", tmp_path, "kill", limit=40)
    assert proc.returncode != 0
    _, err = results(tmp_path, 0)
    assert "rank 1 exited with code 137" in proc.stdout  # the launcher reports the SIGKILL
    message = err["error"]
    assert message.startswith("all_reduce (collective #2) timed out after 3 s on rank 0 of 2")
    assert "rank 1 (died" in message
    assert TIMEOUT <= err["seconds"] < TIMEOUT + 2


def test_a_rank_that_never_joins_is_named_at_init(tmp_path):
    proc = launch("faults.py", tmp_path, "never", limit=40)
    assert proc.returncode != 0
    _, err = results(tmp_path, 0)
    assert "init_process_group(backend='mpi')" in err["error"]
    assert "rank(s) [1] of 2 never joined" in err["error"]
    assert TIMEOUT <= err["seconds"] < TIMEOUT + 2


def test_a_dead_pipeline_stage_is_named_in_its_subgroup(tmp_path):
    proc = launch("faults.py", tmp_path, "pipe", limit=40)
    assert proc.returncode != 0
    _, err = results(tmp_path, 0)
    message = err["error"]
    assert message.startswith("recv (collective #"), message
    assert "in group group1 (ranks [0, 1])) timed out after 3 s on rank 0 of 2" in message
    assert "rank 1 (died" in message
    assert TIMEOUT <= err["seconds"] < TIMEOUT + 2
