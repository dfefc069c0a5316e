"""The tensor-parallel communication ops beyond first order, in a world of one (each collective is then the
identity): their vjp is the conjugate op (so gradients of gradients go through them) and their jvp is the
op on the tangent. The two-process behaviour of the ops themselves is tested in test_parallel.py."""
import numpy as np
import pytest

import minigrad as mg
import minigrad.autograd.forward_ad as fwAD
import minigrad.distributed as dist
from minigrad.distributed.tensor_parallel.comm_ops import (copy_to_parallel, gather_from_parallel,
                                                           reduce_from_parallel, scatter_to_parallel)
from dist_jobs import needs_mpi


@pytest.fixture
def world_of_one(monkeypatch):
    for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "MINIGRAD_STORE_HOSTED"):
        monkeypatch.delenv(k, raising=False)
    dist.init_process_group("mpi", rank=0, world_size=1, timeout=10)
    yield dist
    dist.destroy_process_group()


def _chain(x):
    y = copy_to_parallel(x) ** 2
    y = reduce_from_parallel(y * x)
    return scatter_to_parallel(gather_from_parallel(y.exp()))


@needs_mpi
def test_comm_ops_gradgradcheck_and_jvp(world_of_one):
    x = mg.tensor(np.random.default_rng(0).standard_normal((2, 3)) * 0.5, dtype=mg.float64, requires_grad=True)
    assert mg.autograd.gradgradcheck(_chain, (x,))
    t = mg.tensor(np.ones((2, 3)), dtype=mg.float64)
    with fwAD.dual_level():
        jvp = fwAD.unpack_dual(_chain(fwAD.make_dual(x, t))).tangent
    xv = x.detach().numpy()
    np.testing.assert_allclose(jvp.detach().numpy(), 3 * xv ** 2 * np.exp(xv ** 3), rtol=1e-12)
