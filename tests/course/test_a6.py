"""Assignment a6 (ring all-reduce, bucketed DDP): the solution scores 100 % (public and hidden cases), the
generated student notebook scores 0 with a "not implemented" message per test, planted bugs lose exactly
the tests they break with feedback that names the bug, and part 1's failure never cascades into part 2.

Planted bugs live in a6_variants/ (``# %% [cell-id]`` cells or patches of the solution: course_support.py).
"""
import re
from pathlib import Path

import numpy as np
import pytest

from autograder.grader import GradeOptions, grade_notebook
from autograder.spec import ROOT, load_assignment
from course_support import check_planted, grade_planted, result_of

SOLUTION = ROOT / "solutions" / "a6_data_parallel.ipynb"
STUDENT = ROOT / "assignments" / "a6_data_parallel.ipynb"
VARIANTS = Path(__file__).resolve().parent / "a6_variants"
FULL = {"part1/sum on every rank": 20, "part1/bytes and neighbours": 15, "part1/sizes that do not divide": 10,
        "part2/buckets": 10, "part2/averaged gradients": 20, "part2/launched during backward": 15,
        "part2/training": 10}

# variant -> {test: message it must give}; every other test keeps its full points
PLANTED = {
    "ring_deadlock": {
        "part1/sum on every rank": r"never finished: deadlock: rank 0 in recv from rank 1, rank 1 in recv from rank 0",
        "part1/bytes and neighbours": r"deadlock: rank 0 in recv from rank 2, rank 1 in recv from rank 0, rank 2",
        "part1/sizes that do not divide": r"deadlock"},
    "ring_off_by_one": {
        "part1/sum on every rank": r"rank 0: chunk 0 \(elements 0:4\) holds the sum of rank\(s\) \[1\] only.*off by one",
        "part1/bytes and neighbours": r"credited only to a ring whose result is right.*off by one",
        "part1/sizes that do not divide": r"could not be broadcast"},
    "ring_all_to_all": {
        "part1/bytes and neighbours": r"rank 0 sent 72 bytes to rank 2 .*only to its right neighbour, rank 1",
        "part1/sizes that do not divide": r"only to its right neighbour"},
    "ddp_average_twice": {
        "part2/averaged gradients": r"0.5 x the average gradient: divided by the world size twice",
        "part2/training": r"after 3 SGD steps"},
    "ddp_forward_order": {
        "part2/buckets": r"must follow the \*reverse\* registration order",
        "part2/launched during backward": r"the buckets hold \[12, 5, 15\] elements, in that order"},
    "ddp_launch_at_end": {
        "part2/launched during backward": r"bucket 0 \(\['b2', 'W2'\]\) was complete, but its all-reduce had not "
                                          r"started when the next gradient \(b1\) arrived"},
}


@pytest.fixture(scope="module")
def a6():
    return load_assignment("a6")


def grade(a6, path, tmp_path, **opts):
    return grade_notebook(path, a6, GradeOptions(artifacts_dir=tmp_path / "artifacts", **opts))


def test_spec_parts_and_points(a6):
    assert {f"{p.id}/{t.name}": t.points for p in a6.parts for t in p.tests} == FULL
    assert a6.max_score == 100



# (the solution's full marks, hidden cases on, are checked beside the hostile corpus: tests/autograder/test_hostile_course.py)


def test_fresh_student_copy_scores_zero_and_says_not_implemented(a6, tmp_path):
    result = grade(a6, STUDENT, tmp_path)
    assert result.score == 0
    for key in FULL:
        assert "not implemented yet" in result_of(result, key).message


def test_planted_bugs_lose_only_what_they_break(a6, tmp_path):
    """Variants in different parts share a submission (course_support.grade_planted): each costs only its part."""
    graded = grade_planted(a6, SOLUTION, VARIANTS, sorted(PLANTED), tmp_path, lambda path: grade(a6, path, tmp_path))
    for name, expected in PLANTED.items():
        result, parts = graded[name]
        check_planted(name, result, parts, FULL, {k: 0 for k in expected},
                      {k: re.compile(v) for k, v in expected.items()})


def test_simworld_reports_the_waiting_ranks_of_a_deadlock():
    from minigrad.distributed.simworld import DeadlockError, SimWorld
    world = SimWorld(3, timeout=5)
    with pytest.raises(DeadlockError, match="rank 0 in recv from rank 2, rank 1 in recv from rank 0, rank 2 in "
                                            "recv from rank 1 waiting"):
        world.run(lambda comm: comm.recv((comm.rank - 1) % comm.size))
    world = SimWorld(2)
    assert [r.tolist() for r in world.run(lambda comm, x: comm.iall_reduce(x).wait(),
                                          [(np.ones(2),), (np.arange(2.0),)])] == [[1, 2], [1, 2]]
    with pytest.raises(Exception, match="send to rank 2, which is not another rank"):
        SimWorld(2).run(lambda comm: comm.send(np.ones(1), 2))
