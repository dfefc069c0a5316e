"""Assignment a9 (tensor parallelism, an FSDP unit, a 1F1B pipeline): the generated student notebook scores 0 with a "not
implemented" message per test, planted bugs lose exactly the tests they break with feedback that names the
bug, and a part's failure never cascades into another. The solution's full marks (hidden cases on) are checked
beside the hostile corpus (tests/autograder/test_hostile_course.py).

Planted bugs live in a9_variants/ (``# %% [cell-id]`` cells or patches of the solution: course_support.py).
"""
import re
from pathlib import Path

import numpy as np
import pytest

from autograder.grader import GradeOptions, grade_notebook
from autograder.spec import ROOT, load_assignment
from course_support import check_planted, grade_planted, result_of

SOLUTION = ROOT / "solutions" / "a9_model_parallelism.ipynb"
STUDENT = ROOT / "assignments" / "a9_model_parallelism.ipynb"
VARIANTS = Path(__file__).resolve().parent / "a9_variants"
FULL = {"part1/f: identity forward, all-reduce backward": 6, "part1/g: all-reduce forward, identity backward": 6,
        "part1/column-parallel layer": 8, "part1/row-parallel layer": 8,
        "part1/MLP vs one process, one all-reduce each way": 12, "part2/flat padded shards": 5,
        "part2/forward all-gathers the shard": 7, "part2/backward gathers again and reduce-scatters": 10,
        "part2/two units train like one process": 6, "part2/the full weight is freed after forward": 7,
        "part3/gradients vs one process": 8, "part3/activations and gradients between neighbours": 5,
        "part3/1F1B order, at most p - rank micro-batches held": 7, "part3/bubble (p-1)/(m+p-1)": 5}
PART3 = [k for k in FULL if k.startswith("part3/")]

# variant -> {test: message it must give}; every other test keeps its full points
PLANTED = {
    "tp_f_no_all_reduce": {
        "part1/f: identity forward, all-reduce backward": r"x\.grad is its own upstream gradient: f's backward must "
                                                          r"all-reduce",
        "part1/column-parallel layer": r"x\.grad holds only its own slice's share .* all-reduce in f's backward is "
                                       r"missing",
        "part1/MLP vs one process, one all-reduce each way": r"only its own slice's share"},
    "tp_g_backward_all_reduce": {
        "part1/g: all-reduce forward, identity backward": r"sum of every rank's upstream gradient: g's backward is "
                                                          r"the identity",
        "part1/row-parallel layer": r"RowParallelLinear x\.grad: output wrong",
        "part1/MLP vs one process, one all-reduce each way": r"vs one process: dx"},
    "tp_bias_before_reduce": {
        "part1/row-parallel layer": r"output holds the bias 2 times: add the bias after the all-reduce",
        "part1/MLP vs one process, one all-reduce each way": r"vs one process: y"},
    "tp_gather_weight": {
        "part1/column-parallel layer": r"rank 0 ran all_gather of 48 bytes in forward; expected no collective .* "
                                       r"never holds the full weight",
        "part1/MLP vs one process, one all-reduce each way": r"ran all_gather of 96 bytes, all_reduce of 72 bytes in "
                                                             r"forward; expected all_reduce of 72 bytes"},
    "fsdp_no_padding": {
        "part2/flat padded shards": r"rank 1's shard has 7 numbers; pad the flat vector of 15 with 1 zeros"},
    "fsdp_sum_not_average": {
        "part2/backward gathers again and reduce-scatters": r"the shard's gradient is 2 x the average: .* divide by "
                                                            r"comm\.size",
        "part2/two units train like one process": r"after 3 SGD steps vs one process",
        "part2/the full weight is freed after forward": r"credited only to a unit whose gradients are right"},
    "fsdp_keep_weight": {
        "part2/backward gathers again and reduce-scatters": r"all-gather the weight again at the start of backward",
        "part2/two units train like one process": r"per step, an FSDP model of 2 units runs all_gather",
        "part2/the full weight is freed after forward": r"over the budget .* full weight is 49,664 B — free it"},
    "pp_gpipe": {
        "part3/1F1B order, at most p - rank micro-batches held": r"stage 0 held 5 micro-batches' activations at once "
                                                                 r"\(FFFFFBBBBB\); 1F1B holds at most p - rank = 3"},
    "pp_warmup_one_more": {
        "part3/1F1B order, at most p - rank micro-batches held": r"stage 0 held 4 micro-batches' activations at once "
                                                                 r"\(FFFFBFBBBB\)"},
    "pp_no_warmup": {k: r"no two stages ever computed at the same time" for k in PART3},
    "pp_grad_not_sent": {k: r"the stages got stuck: deadlock: rank 0 in recv from rank 1" for k in PART3},
}


@pytest.fixture(scope="module")
def a9():
    return load_assignment("a9")


def grade(a9, path, tmp_path, **opts):
    return grade_notebook(path, a9, GradeOptions(artifacts_dir=tmp_path / "artifacts", **opts))


def test_spec_parts_and_points(a9):
    assert {f"{p.id}/{t.name}": t.points for p in a9.parts for t in p.tests} == FULL
    assert a9.max_score == 100


def test_fresh_student_copy_scores_zero_and_says_not_implemented(a9, tmp_path):
    result = grade(a9, STUDENT, tmp_path)
    assert result.score == 0
    for key in FULL:
        assert "not implemented yet" in result_of(result, key).message


def test_planted_bugs_lose_only_what_they_break(a9, tmp_path):
    """Variants in different parts share a submission (course_support.grade_planted): each costs only its part."""
    graded = grade_planted(a9, SOLUTION, VARIANTS, sorted(PLANTED), tmp_path, lambda path: grade(a9, path, tmp_path))
    for name, expected in PLANTED.items():
        result, parts = graded[name]
        check_planted(name, result, parts, FULL, {k: 0 for k in expected},
                      {k: re.compile(v) for k, v in expected.items()})


def test_recorded_collectives_sum_gather_and_scatter_in_rank_order():
    """The world the grader hands each rank: the collectives' results, bit-identical on every rank, and the
    parent's check that the world's messages are exactly the recorded collectives'."""
    from autograder.assignments._a9_model_parallelism import comm as C, world as W
    from autograder.spec import Case
    xs = np.random.default_rng(0).standard_normal((3, 6))

    def rank(c, r, mark):
        s = c._all_reduce(xs[r])
        mark()
        return {"sum": s, "gather": c._all_gather(xs[r][:2]), "scatter": c._reduce_scatter(xs[r])}
    obs = W.observation(*W.run_world(3, rank, W._Collectives))
    case = Case({"world": 3})
    assert C.check_world(case, obs) is None
    for r in range(3):
        assert np.array_equal(obs[f"sum.{r}"], obs["sum.0"]) and np.allclose(obs["sum.0"], xs.sum(0))
        assert np.array_equal(obs[f"gather.{r}"], xs[:, :2].ravel())
        assert np.allclose(obs[f"scatter.{r}"], xs.sum(0)[2 * r:2 * r + 2])
        assert [k for k, _, _ in C.phase(obs, r, 0)] == ["all_reduce"]
        assert [(k, v.size) for k, v, _ in C.phase(obs, r, 1)] == [("all_gather", 2), ("reduce_scatter", 6)]
    forged = dict(obs, messages=obs["messages"][1:])          # a message the recorder did not send
    assert C.check_world(case, forged).reject
