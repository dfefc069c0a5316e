"""The parallelism pieces that need no second process: schedules' orders, the bubble from a timeline,
PowerSGD's choice of matrices, and the argument errors of meshes, groups and plans (a world of one)."""
import numpy as np
import pytest

import minigrad as mg
import minigrad.distributed as dist
from minigrad import nn
from minigrad.distributed.algorithms.ddp_comm_hooks.powerSGD_hook import _matrices
from minigrad.distributed.pipelining import bubble_fraction, gpipe_order, one_f_one_b_order
from minigrad.distributed.tensor_parallel import ColwiseParallel, RowwiseParallel, Shard, parallelize_module
from dist_jobs import needs_mpi


@pytest.mark.parametrize("p, m", [(2, 4), (4, 8), (4, 2), (3, 5)])
def test_one_f_one_b_runs_every_micro_batch_once_with_bounded_stash(p, m):
    for s in range(p):
        order = one_f_one_b_order(s, p, m)
        assert sorted(order) == sorted(gpipe_order(s, p, m))
        in_flight, peak = 0, 0
        for action, mb in order:
            in_flight += 1 if action == "F" else -1
            peak = max(peak, in_flight)
            if action == "B":
                assert ("F", mb) in order[:order.index((action, mb))]
        assert peak == min(p - s, m)   # GPipe's is m


def test_bubble_of_an_ideal_pipeline_timeline_is_the_formula():
    p, m, tf, tb = 4, 6, 1.0, 2.0
    timelines = []
    for s in range(p):  # GPipe on equal stages: F of mb i on stage s at (s + i), B after all forwards
        fwd = [{"start": (s + i) * tf, "end": (s + i + 1) * tf} for i in range(m)]
        t0 = (m + p - 1) * tf
        bwd = [{"start": t0 + (p - 1 - s + i) * tb, "end": t0 + (p - s + i) * tb} for i in range(m)]
        timelines.append(fwd + bwd)
    assert bubble_fraction(timelines) == pytest.approx((p - 1) / (m + p - 1))


class _Bucket:
    def __init__(self, shapes):
        self.ps = [mg.zeros(*s) for s in shapes]

    def parameters(self):
        return self.ps


def test_powersgd_compresses_only_matrices_it_makes_smaller():
    comp, rest = _matrices(_Bucket([(32, 8), (32,), (3, 2), (64, 4, 3, 3)]), rank=2)
    assert comp == [(0, 32, 8), (294, 64, 36)]            # (3, 2) at rank 2 would grow: sent whole
    assert rest == [(256, 32), (288, 6)]


@pytest.fixture
def world_of_one(monkeypatch):
    for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "MINIGRAD_STORE_HOSTED"):
        monkeypatch.delenv(k, raising=False)
    dist.init_process_group("mpi", rank=0, world_size=1, timeout=10)
    yield dist
    dist.destroy_process_group()


@needs_mpi
def test_mesh_group_and_plan_errors(world_of_one):
    with pytest.raises(mg.errors.ArgumentError, match=r"mesh_shape \(2, 2\) holds 4 ranks, but the world has 1"):
        dist.init_device_mesh("cpu", (2, 2))
    with pytest.raises(mg.errors.ArgumentError, match="2 mesh_dim_names"):
        dist.DeviceMesh("cpu", [0], mesh_dim_names=("dp", "tp"))
    mesh = dist.init_device_mesh("cpu", (1,), mesh_dim_names=("tp",))
    with pytest.raises(mg.errors.ArgumentError, match="no dimension named 'pp'"):
        mesh.get_group("pp")
    with pytest.raises(mg.errors.ArgumentError, match=r"ranks must be distinct ranks of this world of size 1"):
        dist.new_group([0, 1])
    with pytest.raises(mg.errors.ArgumentError, match="matches no submodule"):
        parallelize_module(nn.Sequential(nn.Linear(2, 2)), mesh["tp"], {"1": ColwiseParallel()})
    with pytest.raises(mg.errors.ArgumentError, match="output_layouts must be Replicate"):
        RowwiseParallel(output_layouts=Shard(0))
    with pytest.raises(mg.errors.ArgumentError, match="recv: src=3 is not a rank of group"):
        dist.recv(mg.zeros(2), 3, group=mesh.get_group())
    outsider = dist.GroupMember.NON_GROUP_MEMBER
    with pytest.raises(mg.errors.ArgumentError, match="not a member of the group"):
        dist.all_reduce(mg.ones(2), group=outsider)


@needs_mpi
def test_a_world_of_one_parallelizes_to_the_same_model(world_of_one):
    mg.manual_seed(0)
    ref = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2)).double()
    mg.manual_seed(0)
    tp = parallelize_module(nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2)).double(), None,
                            {"0": ColwiseParallel(), "2": RowwiseParallel()})
    x = mg.tensor(np.random.default_rng(0).standard_normal((3, 4)))
    np.testing.assert_allclose(tp(x).detach().numpy(), ref(x).detach().numpy(), atol=1e-12)
    dist.reset_comm_stats()
    tp(x.requires_grad_()).sum().backward()
    assert [r["op"] for r in dist.comm_log()] == ["all_reduce", "all_reduce"]  # g forward, f backward
