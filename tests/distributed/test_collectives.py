"""Every collective, op and dtype on a real 2-rank MPI job (one plain ``mpiexec -n 2`` for the module),
checked against NumPy on the same inputs."""
import sys

import numpy as np
import pytest

from dist_jobs import WORKERS, launch, needs_mpi, results

sys.path.insert(0, str(WORKERS))
from dist_collectives import DTYPES, OPS, inputs  # noqa: E402

pytestmark = [pytest.mark.mpi, needs_mpi]
WORLD = 2


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    out = tmp_path_factory.mktemp("collectives")
    proc = launch("dist_collectives.py", out, plain_mpiexec=True, env={"MINIGRAD_EMULATE_CUDA": "1"})
    assert proc.returncode == 0, proc.stdout
    return [results(out, r)[0] for r in range(WORLD)]


def expected_reduce(op, dtype):
    xs = np.stack([inputs(r, dtype) for r in range(WORLD)])
    if op == "AVG":
        return (xs.astype(np.float64).sum(0) / WORLD).astype(dtype)
    fn = {"SUM": np.sum, "PRODUCT": np.prod, "MIN": np.min, "MAX": np.max}[op]
    return fn(xs, axis=0).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_all_reduce_matches_numpy(job, op, dtype):
    for rank in range(WORLD):
        if op == "AVG" and np.dtype(dtype).kind in "iu":
            assert "AVG needs a floating-point tensor" in str(job[rank][f"all_reduce.{op}.{dtype}.error"])
            continue
        got = job[rank][f"all_reduce.{op}.{dtype}"]
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_allclose(got.astype(np.float64), expected_reduce(op, dtype).astype(np.float64),
                                   rtol=1e-3 if dtype == "float16" else 1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
def test_broadcast_all_gather_reduce_scatter(job, dtype):
    per_rank = [inputs(r, dtype) for r in range(WORLD)]
    rtol = 1e-3 if dtype == "float16" else 1e-6
    for rank in range(WORLD):
        np.testing.assert_array_equal(job[rank][f"broadcast.{dtype}"], per_rank[1])
        np.testing.assert_array_equal(job[rank][f"all_gather.{dtype}"], np.stack(per_rank))
        want = sum(p.astype(np.float64) * (rank + 1) for p in per_rank)
        np.testing.assert_allclose(job[rank][f"reduce_scatter.{dtype}"].astype(np.float64), want, rtol=rtol)


def test_send_recv_from_any_source(job):
    assert int(job[1]["recv.source"]) == 0
    np.testing.assert_array_equal(job[1]["recv"], inputs(0, "float64"))


def test_async_all_reduce_overlaps_computation(job):
    for rank in range(WORLD):
        issued, computed, completed = job[rank]["async.times"]
        assert issued < computed <= completed  # computation ran while the all-reduce was in flight
        assert bool(job[rank]["async.is_completed"])
        np.testing.assert_array_equal(job[rank]["async.result"], [3.0, 3.0, 3.0])


def test_noncontiguous_and_device_tensors_go_through_host_copies(job):
    base = np.arange(12.0).reshape(3, 4)
    for rank in range(WORLD):
        np.testing.assert_array_equal(job[rank]["noncontiguous"], (base * 3).T)
        want = sum(inputs(r, "float32") for r in range(WORLD))
        np.testing.assert_allclose(job[rank]["cuda"], want, rtol=1e-6)
        assert int(job[rank]["stats.all_reduce.calls"]) == len(OPS) * len(DTYPES) - 3 + 3  # + async, nc, cuda
