"""Assignment a10 (the KV cache, the block allocator, continuous batching): the solution scores 100 %, the
generated student notebook 0 with a "not implemented" message per test, planted bugs score partially with
feedback that names the bug, and a broken or copied early part never cascades into later parts. Planted bugs
live in a10_variants/."""
import re
from pathlib import Path

import nbformat
import pytest

from autograder.generate import render, student_notebook
from autograder.grader import GradeOptions, grade_notebook
from autograder.spec import ROOT, load_assignment
from course_support import (check_planted, execute_notebook, forbidden_hits, grade_planted, result_of, scores,
                            solution_with as _solution_with)

SOLUTION = ROOT / "solutions" / "a10_kv_cache.ipynb"
STUDENT = ROOT / "assignments" / "a10_kv_cache.ipynb"
VARIANTS = Path(__file__).resolve().parent / "a10_variants"

FULL = {"part1/decoding equals recomputation": 10, "part1/chunks after cached tokens": 10,
        "part1/greedy tokens equal recomputation": 10, "part2/random traces": 15,
        "part2/a full pool and bad frees raise": 5, "part2/in the engine": 15,
        "part3/outputs equal running alone": 10, "part3/the step log replays the policy": 20, "part3/throughput": 5}


@pytest.fixture(scope="module")
def a10():
    return load_assignment("a10")


def grade(a10, path, **opts):
    return grade_notebook(path, a10, GradeOptions(**opts))


def test_spec_parts_cells_hidden_cases_stubs_and_forbidden_uses(a10):
    assert {f"{p.id}/{t.name}": t.points for p in a10.parts for t in p.tests} == FULL and a10.max_score == 100
    nb = nbformat.read(SOLUTION, as_version=4)
    assert [c.metadata["grader"]["id"] for c in nb.cells if "grader" in c.metadata] == a10.graded_cells()
    assert nb.metadata["grader"]["assignment"] == "a10"
    assert {f"{p}/{t}" for p, t in a10.hidden_cases()} == set(FULL), "every test has hidden cases"
    from autograder.stubs import targets
    stubbed = {t.qualname for p in a10.parts for t in targets(p.stubs)}   # each resolves to minigrad's own code
    assert {"BlockAllocator", "KVCache", "LayerKVCache", "Scheduler.admit", "Scheduler.make_room"} <= stubbed

    def forbidden(src):
        return bool(forbidden_hits(a10, src))
    for src in ("from minigrad.inference import BlockAllocator", "from minigrad.inference.kv_cache import KVCache",
                "import minigrad.inference.block_allocator as ba", "mg.inference.BlockManager(a, 4)",
                "mg.inference.LLMEngine(model)", "from minigrad.inference import generate", "import torch",
                "a = mg.inference.block_allocator.BlockAllocator(4)"):
        assert forbidden(src), src
    for src in ("class ContinuousScheduler(Scheduler):\n    pass", "seq.status = Status.RUNNING",
                "class BlockAllocator:\n    pass\n\na = BlockAllocator()",
                "self.manager.allocate(seq.seq_id, seq.tokens)", "mg.cat([a, b], dim=2)",
                "F.scaled_dot_product_attention(q, k, v, attn_mask=m)", "raise OutOfMemoryError('full')"):
        assert not forbidden(src), src
    assert not any(forbidden(c.source) for c in nb.cells if "grader" in c.metadata)


# (the solution's full marks, hidden cases on, are checked beside the hostile corpus: tests/autograder/test_hostile_course.py)


def test_student_notebook_is_generated_and_scores_zero(a10, tmp_path):
    nb = nbformat.read(SOLUTION, as_version=4)
    assert STUDENT.read_bytes() == render(student_notebook(nb, "a10_kv_cache")), \
        "assignments/a10_kv_cache.ipynb is stale: run `make assignments`"
    assert "BEGIN SOLUTION" not in STUDENT.read_text()
    path = tmp_path / "a10_kv_cache.ipynb"
    path.write_bytes(STUDENT.read_bytes())
    r = grade(a10, path)
    assert r.score == 0 and r.max_score == 100 and r.status == "ok"
    cell = {"part1": "a10-cache", "part2": "a10-allocator", "part3": "a10-scheduler"}
    for t in r.tests:
        c = cell[t.key.split("/")[0]]
        assert t.message.startswith("not implemented yet: this part is not started (its cells ") and \
            f"'{c}'" in t.message and "still raise NotImplementedError" in t.message, (t.key, t.message)


# variant file -> (the scores that differ from full marks, substrings of the failed tests' feedback)
PLANTED = {
    "mask_top_left": (
        {"part1/decoding equals recomputation": 0, "part1/chunks after cached tokens": 0,
         "part1/greedy tokens equal recomputation": 0},
        {"part1/chunks after cached tokens": ["in the chunk of 4 tokens fed after 3 cached ones",
                                              "aligned to the bottom right (query i sees keys j <= S - L + i)"],
         "part1/decoding equals recomputation": ["does the new query see every cached key"]}),
    "positions_restart": (
        {"part1/decoding equals recomputation": 0, "part1/chunks after cached tokens": 0,
         "part1/greedy tokens equal recomputation": 0},
        {"part1/decoding equals recomputation": ["position_ids(1) after 5 cached tokens gave [0], expected [5]"],
         "part1/greedy tokens equal recomputation": ["position_ids(1) after 4 cached tokens gave [0], expected [4]"]}),
    "free_ignores_refcount": (
        {"part2/random traces": 0, "part2/a full pool and bad frees raise": 0, "part2/in the engine": 0},
        {"part2/random traces": ["call 16 (free(3)): free(3) returned True, expected False",
                                 "True exactly when that was the last reference"],
         "part2/a full pool and bad frees raise": ["errors are credited only to an allocator that works"]}),
    "free_list_leak": (
        {"part2/random traces": 0, "part2/a full pool and bad frees raise": 0, "part2/in the engine": 0},
        {"part2/random traces": ["num_free_blocks is 7, but 0 of 8 blocks are held",
                                 "did not go back on the free list"],
         "part2/in the engine": ["in the engine, call ", "did not go back on the free list"]}),
    "full_pool_index_error": (
        {"part2/a full pool and bad frees raise": 0},
        {"part2/a full pool and bad frees raise": ["allocate() on a full pool: another error",
                                                   "expected minigrad's OutOfMemoryError"]}),
    "static_batching": (
        {"part3/the step log replays the policy": 0, "part3/throughput": 0},
        {"part3/the step log replays the policy": [re.compile(r"step \d+: request \d+ was first in line and fits"),
                                                   "continuous batching"],
         "part3/throughput": [re.compile(r"your scheduler took \d+ steps for these requests, minigrad's 73")]}),
    "preempt_oldest": (                    # preempting a sequence already decoding breaks the engine's plan too
        {"part3/outputs equal running alone": 5, "part3/the step log replays the policy": 40 / 3},
        {"part3/the step log replays the policy": ["step 6: preempted [1], expected [4]", "preempt the newest"],
         "part3/outputs equal running alone": ["the engine stopped at step"]}),
    "overtaking": (
        {"part3/the step log replays the policy": 40 / 3},
        {"part3/the step log replays the policy": ["was admitted before request 4, which was waiting ahead of it",
                                                   "first come, first served"]}),
}


def test_every_variant_file_is_tested():
    assert {p.stem for p in VARIANTS.glob("*.py")} == set(PLANTED)


def test_planted_bugs_score_partially_and_name_the_bug(a10, tmp_path):
    """Variants in different parts share a submission (course_support.grade_planted): each costs only its part."""
    graded = grade_planted(a10, SOLUTION, VARIANTS, sorted(PLANTED), tmp_path, lambda path: grade(a10, path))
    for variant, (changed, feedback) in PLANTED.items():
        result, parts = graded[variant]
        check_planted(variant, result, parts, FULL, changed, feedback)


def test_broken_or_copied_parts_cost_only_themselves(a10, tmp_path):
    broken = {"a10-cache": "raise RuntimeError('half-written cell')\n",
              "a10-allocator": "from minigrad.inference import BlockAllocator\n"}   # copying the library's
    r = grade(a10, _solution_with(SOLUTION, tmp_path / "broken.ipynb", broken))
    got = scores(r)
    assert all(got[k] == 0 for k in FULL if k.startswith(("part1/", "part2/")))
    assert {k: v for k, v in got.items() if k.startswith("part3/")} == \
        {k: v for k, v in FULL.items() if k.startswith("part3/")}, "part 3 uses the reference parts 1-2"
    assert "RuntimeError in cell 'a10-cache': half-written cell" in result_of(r, "part1/decoding equals recomputation").message
    assert "cell 'a10-allocator' line 1 uses" in result_of(r, "part2/random traces").message


@pytest.mark.notebook
def test_solution_notebook_executes_and_self_checks_pass():
    outs, text = execute_notebook(SOLUTION)
    assert not [o for o in outs if o.output_type == "error"]
    for part, pts in (("part1", 30), ("part2", 35), ("part3", 35)):
        assert f"a10 {part}: {pts}/{pts} points on the public tests" in text
