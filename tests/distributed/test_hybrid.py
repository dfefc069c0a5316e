"""DP x TP and DP x PP on a real 4-rank MPI job (a 2 x 2 mesh; 4 processes on 2 cores is fine for
correctness), against one process on the whole batch; and new_group with member lists that disagree."""
import sys

import numpy as np
import pytest

import minigrad as mg
from dist_jobs import WORKERS, launch, needs_mpi, results

sys.path.insert(0, str(WORKERS))
from parallel_models import LR, STEPS, gpt, gpt_loss, mlp, mlp_data, mse, tokens, train  # noqa: E402
from test_parallel import tp_shard  # noqa: E402

pytestmark = [pytest.mark.mpi, needs_mpi]


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    out = tmp_path_factory.mktemp("hybrid")
    proc = launch("hybrid_train.py", out, nproc=4, limit=120)
    assert proc.returncode == 0, proc.stdout
    return [results(out, r) for r in range(4)]


def test_the_mesh_groups(job):
    for rank, (_, info) in enumerate(job):
        assert info["coordinate"] == [rank // 2, rank % 2]
        assert info["tp_ranks"] == [rank - rank % 2, rank - rank % 2 + 1]      # rows of [[0, 1], [2, 3]]
        assert info["dp_ranks"] == [rank % 2, rank % 2 + 2]                    # columns
        assert len(info["dptp_groups"]) == 2 and "world" not in info["dptp_groups"]


def test_dp_x_tp_gpt_equals_one_process(job):
    model = gpt()
    train(model, STEPS, tokens, gpt_loss, mg.optim.Adam(model.parameters(), lr=LR))
    for rank, (arrays, _) in enumerate(job):
        for n, p in model.named_parameters():
            np.testing.assert_allclose(arrays[f"dptp.{n}"], tp_shard(n, p.detach().numpy(), rank % 2), rtol=0,
                                       atol=1e-6, err_msg=n)
    for n in dict(model.named_parameters()):  # data-parallel replicas are bit-identical
        np.testing.assert_array_equal(job[0][0][f"dptp.{n}"], job[2][0][f"dptp.{n}"])


def test_dp_x_pp_mlp_equals_one_process(job):
    model = mlp()
    train(model, STEPS, mlp_data, mse, mg.optim.SGD(model.parameters(), lr=0.1))
    for n, p in model.named_parameters():
        stage = 0 if n[0] in "02" else 1
        for rank in (stage, stage + 2):   # the stage's two data-parallel replicas
            np.testing.assert_allclose(job[rank][0][f"dppp.{n}"], p.detach().numpy(), rtol=0, atol=1e-6)


def test_new_group_with_disagreeing_members_is_named(job):
    assert "rank 0 made group9 with ranks [0, 1], but rank 1 made it with ranks [0, 1, 2]" in job[0][1]["mismatch"]
    assert "rank 1 made group9 with ranks [0, 1, 2], but rank 0 made it with ranks [0, 1]" in job[1][1]["mismatch"]
    assert job[2][1]["mismatch"] == job[3][1]["mismatch"] == "no error"
