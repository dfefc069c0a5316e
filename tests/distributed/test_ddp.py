"""DistributedDataParallel on a real 2-rank MPI job (one launch for the module) against a single process
training on the concatenated batch (float64)."""
import sys

import numpy as np
import pytest

import minigrad as mg
from dist_jobs import WORKERS, launch, needs_mpi, results

sys.path.insert(0, str(WORKERS))
from dist_models import LR, STEPS, WORLD, data, loss_fn, mlp  # noqa: E402

pytestmark = [pytest.mark.mpi, needs_mpi]


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp")
    proc = launch("ddp_train.py", out)
    assert proc.returncode == 0, proc.stdout
    return [results(out, r) for r in range(WORLD)]


def reference(init, optimizer, steps=STEPS):
    model = mlp(seed=0)
    for n, p in model.named_parameters():
        p.array[...] = init[f"init.{n}"]
    opt = optimizer(model.parameters())
    for step in range(steps):
        opt.zero_grad()
        x, y = data(step)
        loss_fn(model, mg.tensor(x), mg.tensor(y)).backward()
        opt.step()
    return dict(model.named_parameters())


def test_ranks_start_from_rank0s_parameters(job):
    (a0, _), (a1, _) = job
    own_init = dict(mlp(seed=1).named_parameters())
    for n in own_init:
        np.testing.assert_array_equal(a0[f"init.{n}"], a1[f"init.{n}"])
        assert not np.array_equal(a1[f"init.{n}"], own_init[n].detach().numpy())  # rank 1 was overwritten


def test_ddp_sgd_equals_one_process_on_the_whole_batch(job):
    (a0, _), (a1, _) = job
    ref = reference(a0, lambda ps: mg.optim.SGD(ps, lr=LR))
    for n, p in ref.items():
        np.testing.assert_array_equal(a0[f"sgd.{n}"], a1[f"sgd.{n}"])  # bit-identical across ranks
        np.testing.assert_allclose(a0[f"sgd.{n}"], p.detach().numpy(), rtol=0, atol=1e-6)


def test_no_sync_accumulation_equals_the_big_batch(job):
    (a0, _), (a1, _) = job
    model = mlp(seed=0)
    for micro in (1, 2):
        x, y = data(0, micro)
        loss_fn(model, mg.tensor(x), mg.tensor(y)).backward()
    for n, p in model.named_parameters():
        np.testing.assert_array_equal(a0[f"accum.{n}"], a1[f"accum.{n}"])
        np.testing.assert_allclose(a0[f"accum.{n}"], p.grad.numpy(), atol=1e-10)
    assert not np.allclose(a0["local_grad"], a1["local_grad"])  # inside no_sync: nothing averaged yet


def test_zero_adam_equals_adam_and_splits_the_state(job):
    (a0, i0), (a1, i1) = job
    ref = reference(dict(("init." + n, p.detach().numpy()) for n, p in mlp(seed=0).named_parameters()),
                    lambda ps: mg.optim.Adam(ps, lr=0.01))
    for n, p in ref.items():
        np.testing.assert_array_equal(a0[f"zero.{n}"], a1[f"zero.{n}"])
        np.testing.assert_allclose(a0[f"zero.{n}"], p.detach().numpy(), atol=1e-9)
    full = 2 * 8 * sum(p.numel() for p in ref.values())  # Adam: two float64 moments per element
    assert i0["zero_state_bytes"] + i1["zero_state_bytes"] == full
    assert max(i0["zero_state_bytes"], i1["zero_state_bytes"]) < 0.6 * full
    assert sorted(i0["zero_shard"] + i1["zero_shard"]) == list(range(len(ref)))


def test_buckets_in_reverse_order_with_their_caps(job):
    _, info = job[0]
    assert info["buckets"] == [["4.bias", "4.weight"], ["2.bias", "2.weight"], ["0.bias", "0.weight"]]
    assert info["bucket_bytes"] == [8 * 51, 8 * 144, 8 * 40]


def test_first_bucket_is_issued_while_backward_still_runs(job):
    for _, info in job:
        events = info["timeline"]
        grads = [e for e in events if e["kind"] == "grad"]
        reduces = {e["bucket"]: e for e in events if e["kind"] == "all_reduce"}
        backward = next(e for e in events if e["kind"] == "backward")
        last_grad = max(e["t"] for e in grads)
        assert reduces[0]["issued"] < last_grad < backward["end"]
        assert [reduces[b]["issued"] for b in sorted(reduces)] == sorted(r["issued"] for r in reduces.values())
        for b, r in reduces.items():  # a bucket starts right after its last gradient is ready
            assert r["issued"] >= max(e["t"] for e in grads if e["bucket"] == b)
            assert r["issued"] < r["returned"]  # stamped when handed over, before the backend's call


def test_buffers_follow_rank0_at_every_forward(job):
    (a0, _), (a1, _) = job
    assert not np.allclose(a0["bn_after_train_forward"], a1["bn_after_train_forward"])
    np.testing.assert_array_equal(a1["bn_after_eval_forward"], a0["bn_after_train_forward"])


def test_unused_parameters_are_named_or_handled(job):
    (a0, i0), (a1, i1) = job
    for info in (i0, i1):
        assert "'unused.bias', 'unused.weight' got no gradient" in info["unused_error"]
        assert "find_unused_parameters=True" in info["unused_error"]
    np.testing.assert_array_equal(a0["unused.0.weight"], a1["unused.0.weight"])


def test_mismatched_models_are_an_error_not_garbage(job):
    for _, info in job:
        assert "wrap different models" in info["mismatch_error"]
        assert "(8, 4)" in info["mismatch_error"] and "(9, 4)" in info["mismatch_error"]
