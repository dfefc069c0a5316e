"""Assignment a2 (the caching memory pool): the solution scores 100 % (public and hidden cases) quickly,
the generated student notebook scores 0 with a "not implemented" message per test, planted bugs score
partially with feedback that names where the bug is, lying allocators get no credit, and an early part's
failure never cascades into later parts.

Planted bugs and liars live in a2_variants/, one file per submission: graded cells in the
``# %% [cell-id]`` format (whole cells, or patches of the solution's cells: see course_support.py).
"""
import re
import sys
import time
from pathlib import Path

import nbformat
import numpy as np
import pytest

from autograder import check
from autograder.forbidden import forbidden_uses
from autograder.generate import render, student_notebook
from autograder.grader import GradeOptions, grade_notebook
from autograder.spec import ROOT, load_assignment
from course_support import check_planted, grade_planted, cell_overrides, result_of, scores, solution_with

SOLUTION = ROOT / "solutions" / "a2_memory.ipynb"
STUDENT = ROOT / "assignments" / "a2_memory.ipynb"
VARIANTS = Path(__file__).resolve().parent / "a2_variants"

FULL = {
    "part1/round_size": 3, "part1/pools and segment sizes": 3, "part1/bump allocator": 4,
    "part2/best fit": 5, "part2/splitting": 4, "part2/random mallocs and frees": 3, "part2/memory limit": 3,
    "part3/coalescing": 4, "part3/empty_cache": 3, "part3/random mallocs and frees": 3,
    "part3/training trace budgets": 5,
    "part4/retry after empty_cache": 2, "part4/OutOfMemoryError": 3, "part4/8 GB card": 3,
    "part4/minigrad trains on your pool": 2,
}
PART_POINTS = {"part1": 10, "part2": 15, "part3": 15, "part4": 10}
CELL_OF_PART = {"part1": ("a2-sizes", "a2-bump"), "part2": ("a2-bestfit",), "part3": ("a2-coalesce",),
                "part4": ("a2-oom",)}


@pytest.fixture(scope="module")
def a2():
    return load_assignment("a2")


@pytest.fixture(scope="module")
def spec(a2):
    return sys.modules[a2.module_name]


def submission(tmp_path, overrides, name="submission"):
    """The solution notebook with some graded cells replaced."""
    return solution_with(SOLUTION, tmp_path / f"a2_{name}.ipynb", overrides)


def variant(tmp_path, name):
    return submission(tmp_path, cell_overrides((VARIANTS / f"{name}.py").read_text(), SOLUTION), name)


def grade(a2, path, tmp_path, **opts):
    opts.setdefault("artifacts_dir", tmp_path / "artifacts")
    return grade_notebook(path, a2, GradeOptions(**opts))


def solution_namespace():
    """The solution's graded cells run in one namespace (what a student's kernel holds)."""
    from autograder.notebook import load_submission
    ns = {"__name__": "a2_solution"}
    exec("import numpy as np\nimport minigrad as mg\n", ns)
    sub = load_submission(SOLUTION)
    for gid in ("a2-base", "a2-sizes", "a2-bump", "a2-bestfit", "a2-coalesce", "a2-oom"):
        exec(compile(sub.cells[gid], f"<{gid}>", "exec"), ns)
    return ns


# ---- the spec ------------------------------------------------------------------------------------------------
def test_spec_parts_points_and_cells(a2):
    assert [p.id for p in a2.parts] == list(PART_POINTS)
    assert {p.id: p.points for p in a2.parts} == PART_POINTS and a2.max_score == 50
    assert {f"{p.id}/{t.name}": t.points for p in a2.parts for t in p.tests} == FULL
    assert a2.graded_cells() == ["a2-base", "a2-sizes", "a2-bump", "a2-bestfit", "a2-coalesce", "a2-oom"]
    assert a2.solution_path() == SOLUTION
    hidden = a2.hidden_cases()
    assert set(f"{p}/{t}" for p, t in hidden) <= set(FULL) and len(hidden) == len(FULL)


def test_spec_forbids_minigrads_allocator_but_not_the_solution(a2):
    def hits(src):
        return forbidden_uses(src, a2.forbidden, a2.preamble)
    for src in ["from minigrad.memory.allocator import CachingAllocator", "import minigrad.memory as mem",
                "alloc = mg.memory.get_allocator('cpu')", "from minigrad import memory",
                "import importlib\nm = importlib.import_module('minigrad.memory')", "m = getattr(mg, 'memory')"]:
        assert hits(src), src
    for src in ["class CachingAllocator(AllocatorBase):\n    pass",           # the student's own class
                "# unlike minigrad's CachingAllocator, this one ...", "msg = 'see CachingAllocator'"]:
        assert not hits(src), src
    from autograder.notebook import load_submission
    sub = load_submission(SOLUTION)
    for gid in a2.graded_cells():
        assert not hits(sub.cells[gid]), gid


def test_training_traces_are_real_and_deterministic(spec):
    key = ("mlp", (64, 512, 512, 10), (41, 171, 234, 130, 212, 136, 84, 192), 0)
    first = spec._training_ops(*key)
    spec._training_ops.cache_clear()
    again = spec._training_ops(*key)
    assert np.array_equal(first, again), "recording the same training run twice gives the same trace"
    mallocs = first[first[:, 0] == spec.MALLOC]
    frees = first[first[:, 0] == spec.FREE]
    assert len(mallocs) == len(frees) > 100 and sorted(frees[:, 1]) == sorted(mallocs[:, 1])
    sizes = mallocs[:, 2]
    assert sizes.min() >= 1 and (sizes <= spec.MiB).any() and (sizes > spec.MiB // 8).any()


def test_public_budgets_separate_coalescing_from_no_coalescing(spec):
    """Guards the budget tests against changes in minigrad: on every public and hidden training trace,
    an allocator without coalescing is clearly over budget (peak or average unused bytes)."""
    from minigrad.memory.allocator import CachingAllocator

    class NoCoalescing(CachingAllocator):
        def _coalesce(self, block):
            return block

    def run(cls, ops):
        src = spec.TraceSource()
        return spec._Log(spec._drive(cls(src, "x"), src, ops), ops)

    hidden = load_assignment("a2").hidden_cases()[("part3", "training trace budgets")]
    for params in [spec.TRAIN_MLP, spec.TRAIN_CNN] + [c.params for c in hidden]:
        ops = spec.inputs_ops(params)["ops"]
        ref, bad = run(CachingAllocator, ops), run(NoCoalescing, ops)
        worst = max(bad.peak / ref.peak, bad.unused / ref.unused)
        assert worst >= 1.25 * 1.1, (params, bad.peak / ref.peak, bad.unused / ref.unused)


def test_the_graders_fragmentation_is_the_allocators_own_at_peak_reservation(spec):
    """The a2 grader's fragmentation, computed from the log alone (free_holes of the layout), is what
    minigrad's CachingAllocator.fragmentation() says at the op where reserved memory peaks; the other
    number it reports is named for what it is: the unused share of reserved memory."""
    from minigrad.memory.allocator import CachingAllocator
    for params in (spec.TRAIN_MLP, spec.TRAIN_CNN):
        ops = spec.inputs_ops(params)["ops"]
        src = spec.TraceSource()
        log = spec._Log(spec._drive(CachingAllocator(src, "x"), src, ops), ops)
        k = int(np.argmax(log.reserved))
        src2 = spec.TraceSource()
        alloc = CachingAllocator(src2, "x")
        spec._drive(alloc, src2, ops[:k + 1])
        assert log.fragmentation == pytest.approx(alloc.fragmentation()), params
        assert 0 < log.unused_share < 1 and log.unused_share != pytest.approx(log.fragmentation)


# ---- the solution ----------------------------------------------------------------------------------------------

# (the solution's full marks, hidden cases on, are checked beside the hostile corpus: tests/autograder/test_hostile_course.py)


def test_self_check_in_process_passes_on_the_solution(capsys):
    ns = solution_namespace()
    for part, points in PART_POINTS.items():
        res = check("a2", part, namespace=ns)
        assert res.score == res.max_score == points, res.messages
    assert "a2 part4: 10/10 points" in capsys.readouterr().out


@pytest.mark.notebook
def test_solution_notebook_executes_and_self_checks_pass(tmp_path):
    from nbclient import NotebookClient
    nb = nbformat.read(SOLUTION, as_version=4)
    t0 = time.monotonic()
    NotebookClient(nb, timeout=180, kernel_name="python3",
                   resources={"metadata": {"path": str(SOLUTION.parent)}}).execute()
    assert time.monotonic() - t0 < 60
    outs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outs if o.output_type == "stream")
    for part, points in PART_POINTS.items():
        assert f"a2 {part}: {points}/{points} points" in text
    assert "StudentAllocator  fits" in text and "OutOfMemoryError" in text
    assert sum("image/png" in o.get("data", {}) for o in outs if o.output_type == "display_data") >= 2


# ---- the student notebook ------------------------------------------------------------------------------------------
def test_student_notebook_is_generated_from_the_solution():
    nb = nbformat.read(SOLUTION, as_version=4)
    assert STUDENT.read_bytes() == render(student_notebook(nb, "a2_memory"))
    text = STUDENT.read_text()
    assert "BEGIN SOLUTION" not in text and "rest = Block(block.segment" not in text
    def base(notebook):
        return next(c.source for c in notebook.cells if c.metadata.get("grader", {}).get("id") == "a2-base")
    marker, given = base(nbformat.read(STUDENT, as_version=4)).split("\n", 1)
    assert marker.startswith("# GRADED CELL 'a2-base'") and given == base(nb), "the given cell stays whole"


def test_generated_notebook_scores_zero_and_says_not_started_once_per_part(a2, tmp_path):
    r = grade(a2, STUDENT, tmp_path, hidden=True)
    assert r.score == 0 and r.max_score == 50 and r.status == "ok"
    for t in r.tests:
        cells = "|".join(CELL_OF_PART[t.part])
        assert re.search(rf"not implemented yet: this part is not started \(its cells .*'({cells})'", t.message), \
            (t.key, t.message)


# ---- planted bugs ----------------------------------------------------------------------------------------------------
# variant -> ({test: score}, for the scores that differ from full marks; {test: substrings of its feedback})
PLANTED = {
    "no_coalescing": (
        {"part3/coalescing": 0, "part3/empty_cache": 0, "part3/random mallocs and frees": 0,
         "part3/training trace budgets": 0},
        {"part3/coalescing": ["malloc #6", "expected a block of 300.0 KiB at offset 0 B of segment 0",
                              "you asked the device for a new segment", "_coalesce"],
         "part3/empty_cache": ["did not release segment 0", "Segment.is_free()"],
         "part3/random mallocs and frees": ["empty_cache() left", "coalesce"],
         "part3/training trace budgets": ["peak reserved: 12.00 MiB is over the budget of 10.00 MiB",
                                          "the reference needs 8.00 MiB", "coalescing, _coalesce"]}),
    "first_fit": (
        {"part2/best fit": 0},
        {"part2/best fit": ["malloc #6", "got a block of 3,072 B at offset 0 B of segment 0",
                            "expected a block of 3,072 B at offset 11.0 KiB of segment 0", "_take_best_fit"]}),
    "split_unrounded": (
        {"part2/best fit": 1.6667, "part2/splitting": 0, "part2/random mallocs and frees": 0},
        {"part2/splitting": ["malloc #1 (1,000 B", "offset 1,000 B of segment 0",
                             "is not a multiple of the alignment 512"],
         "part2/random mallocs and frees": ["malloc #2", "not a multiple of the alignment 512"]}),
    "split_keeps_size": (
        {"part2/best fit": 0, "part2/splitting": 0, "part2/random mallocs and frees": 0, "part2/memory limit": 0},
        {"part2/splitting": ["malloc #1", "overlaps the live block of malloc #0"],
         "part2/best fit": ["overlaps the live block of malloc #0"]}),
    "no_memory_limit": (
        {"part2/memory limit": 1.5},
        {"part2/memory limit": ["under memory_limit = 30 MiB", "more than the 30.00 MiB allowed", "_new_segment"]}),
    "no_retry": (
        {"part4/retry after empty_cache": 0, "part4/OutOfMemoryError": 0},
        {"part4/retry after empty_cache": ["malloc #1 (19.00 MiB", "raised OutOfMemoryError",
                                           "2.00 MiB of cached segments held no live block",
                                           "self._empty_cache()", "try once more"]}),
    "round_down": (
        {"part1/round_size": 0, "part1/bump allocator": 0},
        {"part1/round_size": ["round_size(513) returned 512, expected 1024"],
         "part1/bump allocator": ["returned a block of only"]}),
}
LIARS = {"liar_fake_stats", "liar_overlap"}


def test_every_variant_file_is_tested():
    assert {p.stem for p in VARIANTS.glob("*.py")} == set(PLANTED) | LIARS


def test_planted_bugs_score_partially_and_name_their_location(a2, tmp_path):
    """Variants in different parts share a submission (course_support.grade_planted): each costs only its part."""
    graded = grade_planted(a2, SOLUTION, VARIANTS, sorted(PLANTED), tmp_path, lambda path: grade(a2, path, tmp_path))
    for name, (diff, feedback) in PLANTED.items():
        result, parts = graded[name]
        check_planted(name, result, parts, FULL, diff, feedback)


def test_budget_failure_comes_with_a_timeline_plot(a2, tmp_path):
    r = grade(a2, variant(tmp_path, "no_coalescing"), tmp_path)
    t = result_of(r, "part3/training trace budgets")
    assert "(timeline: part3_training_trace_budgets_MLP_64-512-512-10_trace.png)" in t.message
    # the unused share is named for what it is; fragmentation is only minigrad.memory's, at peak reservation
    assert re.search(r"unused \d+%: on average [\d.]+ MiB of reserved memory held no requested byte", t.message)
    assert re.search(r"fragmentation at peak reservation \d+% \(1 - largest free block / free bytes", t.message)
    assert t.artifacts and all(Path(a).read_bytes()[:4] == b"\x89PNG" for a in t.artifacts)


def test_broken_part1_does_not_cascade(a2, tmp_path):
    """A round_size that rounds down fails part 1 only: later parts run with the reference round_size."""
    r = grade(a2, variant(tmp_path, "round_down"), tmp_path, hidden=True)
    assert all(t.passed for t in r.tests if t.part != "part1")


# ---- lying allocators ---------------------------------------------------------------------------------------------
def test_allocator_that_reports_small_stats_but_reserves_4x_gets_no_credit(a2, tmp_path):
    r = grade(a2, variant(tmp_path, "liar_fake_stats"), tmp_path, hidden=True)
    for t in r.tests:
        if t.part in ("part3", "part4"):
            assert t.score == 0, (t.key, t.message)
        else:
            assert t.passed, (t.key, t.message)
    assert "peak reserved: 32.00 MiB is over the budget of 10.00 MiB" in \
        result_of(r, "part3/training trace budgets").message
    assert "peak reserved while training" in result_of(r, "part4/minigrad trains on your pool").message


def test_allocator_that_hands_out_overlapping_blocks_gets_no_credit(a2, tmp_path):
    r = grade(a2, variant(tmp_path, "liar_overlap"), tmp_path, hidden=True)
    honest = {"part1/round_size", "part1/pools and segment sizes"}       # its size rules are correct
    for t in r.tests:
        assert t.passed if t.key in honest else t.score == 0, (t.key, t.message)
    assert "overlaps the live block of malloc #0" in result_of(r, "part2/splitting").message


def test_importing_minigrads_allocator_costs_its_part(a2, tmp_path):
    src = ("from minigrad.memory.allocator import CachingAllocator as _Ref\n\n\n"
           "class CoalescingAllocator(BestFitAllocator):\n"
           "    _coalesce = _Ref._coalesce\n\n"
           "    def _free(self, block):\n        self._insert_free(self._coalesce(block))\n")
    r = grade(a2, submission(tmp_path, {"a2-coalesce": src}, "copied"), tmp_path)
    assert scores(r) == {**FULL, **{k: 0 for k in FULL if k.startswith("part3/")}}
    assert "uses `minigrad.memory`, which this assignment asks you to write yourself" in \
        result_of(r, "part3/coalescing").message


def test_own_class_named_like_minigrads_allocator_is_no_forbidden_use(a2, tmp_path):
    from course_support import solution_cells
    src = solution_cells(SOLUTION)["a2-coalesce"] + (
        "\n\nclass CachingAllocator(CoalescingAllocator):\n"
        "    \"\"\"My own name for it (minigrad's CachingAllocator is not imported).\"\"\"\n")
    r = grade(a2, submission(tmp_path, {"a2-coalesce": src}, "own_name"), tmp_path)
    assert {k: v for k, v in scores(r).items() if k.startswith("part3/")} == \
        {k: v for k, v in FULL.items() if k.startswith("part3/")}, r


def test_observations_are_judged_not_believed(a2, spec):
    """The verdicts read only the device log and the blocks: a log whose blocks lie outside every reserved
    segment fails, whatever else the observation claims."""
    from autograder.spec import Case
    from autograder.verdicts import ALLOC, RESERVE
    case = Case({"workload": "scenario", "name": "splitting", "cls": "BestFitAllocator"})
    case.inputs = spec.inputs_ops(case.params)
    n = len(case["ops"])
    forged = {"events": np.array([[RESERVE, 0, 1 << 32, 2 * spec.MiB], [ALLOC, 0, 1 << 40, 1024]], np.int64),
              "marks": np.full(n, 2, np.int64), "status": np.zeros(n, np.int64), "ret": np.zeros(n, np.int64),
              "errors": np.array([""] * n)}
    v = spec.verdict_best_fit(case, forged, None)
    assert not v.passed and "is not inside a reserved segment" in v.message
