"""The 'nccl' backend's code path without a GPU: the emulated CUDA device and a fake cupy.cuda.nccl,
in-process (a world of one: stream and event order) and as a 2-rank job (bytes moved by MPI)."""
import contextlib
import sys

import numpy as np
import pytest

import minigrad as mg
from dist_jobs import WORKERS, launch, needs_mpi, results

sys.path.insert(0, str(WORKERS))
from dist_models import LR, STEPS, WORLD, data, loss_fn, mlp  # noqa: E402

needs_emulator = pytest.mark.skipif(not (mg.cuda.is_available() and mg.cuda.is_emulated()),
                                    reason="needs the emulated CUDA device (MINIGRAD_EMULATE_CUDA=1)")


@contextlib.contextmanager
def fake_cupy(monkeypatch):
    """The fake cupy.cuda.nccl in sys.modules (and no launcher variables) while inside."""
    import fake_nccl
    saved = {k: sys.modules.get(k) for k in ("cupy", "cupy.cuda", "cupy.cuda.nccl")}
    fake_nccl.install()
    fake_nccl.calls.clear()
    for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "MINIGRAD_STORE_HOSTED"):
        monkeypatch.delenv(k, raising=False)
    try:
        yield fake_nccl
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


@pytest.fixture
def fake(monkeypatch):
    import minigrad.distributed as dist
    with fake_cupy(monkeypatch) as fake_nccl:
        dist.init_process_group("nccl", rank=0, world_size=1, timeout=10)
        yield fake_nccl, dist
        dist.destroy_process_group()


@needs_emulator
def test_collective_runs_on_its_own_stream_ordered_by_events(fake):
    nccl, dist = fake
    t = mg.tensor([1.0, 2.0], device="cuda")
    nccl.calls.clear()
    work = dist.all_reduce(t, op=dist.ReduceOp.AVG, async_op=True)
    work.wait()
    names = [c[0] for c in nccl.calls]
    assert names == ["record", "wait_event", "allReduce", "record", "wait_event"]
    compute, comm = nccl.calls[0][1], nccl.calls[2][1]
    assert compute == 0 and comm != 0                       # the collective is not on the compute stream
    assert nccl.calls[1][1] == (comm, compute)              # NCCL stream waits for the compute stream
    assert nccl.calls[4][1] == (compute, comm)              # wait(): compute stream waits for NCCL's
    np.testing.assert_array_equal(t.cpu().numpy(), [1.0, 2.0])


@needs_emulator
def test_cpu_tensors_and_bad_dtypes_are_refused(fake):
    _, dist = fake
    with pytest.raises(mg.errors.DeviceError, match="backend 'nccl' needs cuda tensors"):
        dist.all_reduce(mg.ones(2))
    with pytest.raises(mg.errors.ArgumentError, match="NCCL cannot move bool"):
        dist.all_reduce(mg.tensor([True, False], device="cuda"))


@needs_emulator
def test_unique_id_reaches_ncclcommunicator_as_this_cupy_takes_it(fake, monkeypatch):
    """CuPy >= 14: ``get_unique_id()`` gives bytes and NcclCommunicator takes bytes (the fake follows 14.2, and
    make test-cuda checks it against the real signature); CuPy 13: a tuple of 128 signed chars, both ways."""
    nccl, dist = fake
    got = []

    class Communicator13(nccl.NcclCommunicator):
        def __init__(self, ndev, commId, rank):
            got.append(commId)
            super().__init__(ndev, bytes(b % 256 for b in commId), rank)

    monkeypatch.setattr(sys.modules["cupy"], "__version__", "13.6.0")
    monkeypatch.setattr(nccl, "get_unique_id", lambda: tuple(range(-64, 64)))
    monkeypatch.setattr(nccl, "NcclCommunicator", Communicator13)
    dist.destroy_process_group()
    dist.init_process_group("nccl", rank=0, world_size=1, timeout=10)
    assert got == [tuple(range(-64, 64))]


@pytest.mark.mpi
@needs_mpi
@needs_emulator
def test_two_ranks_collectives_and_ddp(tmp_path):
    proc = launch("nccl_fake.py", tmp_path, env={"MINIGRAD_EMULATE_CUDA": "1"})
    assert proc.returncode == 0, proc.stdout
    (a0, i0), (a1, _) = [results(tmp_path, r) for r in range(WORLD)]
    for a in (a0, a1):
        np.testing.assert_array_equal(a["avg"], [0.5, 1.5, 2.5, 3.5])
        np.testing.assert_array_equal(a["max"], [0, 2, 4, 6])
        np.testing.assert_array_equal(a["gather"], [[0, 10], [1, 11]])
        np.testing.assert_array_equal(a["broadcast"], [1, 1, 1])
        assert "needs cuda tensors" in str(a["cpu_error"])
    np.testing.assert_array_equal(a0["reduce_scatter"], [2, 4])
    np.testing.assert_array_equal(a1["reduce_scatter"], [4, 8])
    np.testing.assert_array_equal(a1["recv"], [5, 6])
    assert i0["barrier_calls"][2] == "allReduce"  # NCCL has no barrier: a one-element all-reduce
    model = mlp(seed=0)
    for n, p in model.named_parameters():
        p.array[...] = a0[f"init.{n}"]
    opt = mg.optim.SGD(model.parameters(), lr=LR)
    for step in range(STEPS):
        opt.zero_grad()
        x, y = data(step)
        loss_fn(model, mg.tensor(x), mg.tensor(y)).backward()
        opt.step()
    for n, p in model.named_parameters():
        np.testing.assert_array_equal(a0[f"sgd.{n}"], a1[f"sgd.{n}"])
        np.testing.assert_allclose(a0[f"sgd.{n}"], p.detach().numpy(), atol=1e-6)
        np.testing.assert_allclose(a0[f"fsdp.{n}"], p.detach().numpy(), atol=1e-6)   # FSDP: the same training
        np.testing.assert_array_equal(a0[f"fsdp.{n}"], a1[f"fsdp.{n}"])
    ref = mlp(seed=0)
    x, y = data(0)
    loss_fn(ref, mg.tensor(x), mg.tensor(y)).backward()
    w = ref[2].weight.grad.numpy()
    np.testing.assert_allclose(a0["tp_grad"], w[:, :4], atol=1e-12)           # row-parallel: columns split
    np.testing.assert_allclose(a1["tp_grad"], w[:, 4:], atol=1e-12)
    assert {"NcclCommunicator", "allReduce", "broadcast"} <= set(i0["tp_calls"])  # the subgroup's own communicator
    for n, p in ref.named_parameters():  # the pipeline's gradients: stage 0 has layers 0-2, stage 1 layer 4
        np.testing.assert_allclose((a0 if n[0] in "02" else a1)[f"pp.{n}"], p.grad.numpy(), atol=1e-12)


@needs_emulator
def test_gpu_checks_parallel_part_runs_on_the_fake(monkeypatch):
    """make gpu-check's FSDP / tensor-parallel / comm-hook check (benchmarks/nccl_check.py), here on the
    emulated device behind the fake NCCL: the check itself is tested before a GPU ever runs it."""
    import runpy
    from dist_jobs import REPO
    with fake_cupy(monkeypatch):
        check = runpy.run_path(str(REPO / "benchmarks" / "nccl_check.py"), run_name="nccl_check")
        assert check["parallel_world_of_one"]() is True
