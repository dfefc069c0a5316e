"""The a2 spec: parts, tests, points and cases."""
from autograder.spec import Assignment, Case, Part, Test

from .observe import observe_minigrad, observe_ops, observe_sizes
from .trace_device import MiB
from .verdicts import (verdict_best_fit, verdict_bump, verdict_card, verdict_coalescing, verdict_empty_cache,
                       verdict_minigrad, verdict_oom, verdict_pools, verdict_random, verdict_round, verdict_training)
from .workloads import inputs_minigrad, inputs_ops, inputs_sizes

CARD = 64 * MiB               # an "8 GB card" scaled down 128x


def _trace(kind, widths, batches, seed=0):
    return {"workload": "training", "kind": kind, "widths": list(widths), "batches": list(batches), "seed": seed}


TRAIN_MLP = _trace("mlp", [64, 512, 512, 10], [41, 171, 234, 130, 212, 136, 84, 192])
TRAIN_CNN = _trace("cnn", [8, 16], [65, 68, 91, 56, 34, 20])
CARD_MLP = _trace("mlp", [64, 2048, 256, 2048, 10], [430, 211, 266, 417, 119, 199, 119, 267])


def _case(label, cls, workload, **extra):
    return Case({**workload, "cls": cls, **extra}, label=label)


def _scen(cls, name, **extra):
    return _case(f"scenario '{name}'", cls, {"workload": "scenario", "name": name}, **extra)


# minigrad's caching allocator, left out of every part's child (autograder/stubs.py): the grader needs none
# of it (the student's allocator serves minigrad in part 4), and a graded cell reaches no copy of it
STUBS = [f"minigrad.memory.allocator.{n}" for n in ("round_size", "segment_size", "pool_of", "should_split",
                                                     "CachingAllocator")]

ASSIGNMENT = Assignment(
    id="a2",
    name="a2_memory",
    title="The caching memory pool",
    notebook="a2_memory.ipynb",
    solution="solutions/a2_memory.ipynb",
    preamble="import numpy as np\nimport minigrad as mg\n",
    timeout=30,
    memory_mb=2048,
    summary="the blocks and segments the student's allocator handed out, checked by the parent (no overlap, "
            "alignment, bounds, a segment log only the grader's device writes); peak reserved bytes and unused bytes "
            "on real minigrad training traces against 1.25x the reference's; OOM retry and an \"8 GB card\"",
    forbidden=["minigrad.memory", "*._ALLOCATORS", "*.get_allocator"],   # minigrad's pool and its registry
    parts=[
        Part("part1", "Sizes, pools and a bump allocator", cells=["a2-base", "a2-sizes", "a2-bump"], stubs=STUBS,
             names=["round_size", "pool_of", "segment_size", "BumpAllocator"],
             objective="Round requests, pick a pool and a segment size; carve blocks from segments.", tests=[
            Test("round_size", 3, observe_sizes, verdict_round, inputs_sizes, cases=[{"seed": 0, "n": 40}]),
            Test("pools and segment sizes", 3, observe_sizes, verdict_pools, inputs_sizes,
                 cases=[{"seed": 1, "n": 40}]),
            Test("bump allocator", 4, observe_ops, verdict_bump, inputs_ops, partial=True, cases=[
                _case("random mallocs and frees (seed 0)", "BumpAllocator",
                      {"workload": "random", "seed": 0, "n": 120, "finish": False}),
                _scen("BumpAllocator", "best fit, large pool")]),
        ]),
        Part("part2", "Best fit and splitting", cells=["a2-bestfit"], stubs=STUBS,
             names=["should_split", "BestFitAllocator"],
             objective="Reuse cached free blocks: the smallest that fits, split when the rest is worth keeping.",
             tests=[
            Test("best fit", 5, observe_ops, verdict_best_fit, inputs_ops, partial=True, cases=[
                _scen("BestFitAllocator", "best fit, small pool"),
                _scen("BestFitAllocator", "best fit, large pool"),
                _case("holes between live blocks (seed 0)", "BestFitAllocator", {"workload": "holes", "seed": 0})]),
            Test("splitting", 4, observe_ops, verdict_best_fit, inputs_ops, cases=[
                _scen("BestFitAllocator", "splitting")]),
            Test("random mallocs and frees", 3, observe_ops, verdict_random, inputs_ops, partial=True, cases=[
                _case(f"random (seed {s})", "BestFitAllocator", {"workload": "random", "seed": s, "n": 300,
                                                                 "finish": False}) for s in (1, 2)]),
            Test("memory limit", 3, observe_ops, verdict_oom, inputs_ops, partial=True, cases=[
                _case("scenario 'memory limit' under memory_limit = 30 MiB", "BestFitAllocator",
                      {"workload": "scenario", "name": "memory limit"}, limit=30 * MiB, catch_oom=True),
                _case("scenario 'memory limit' on a 30 MiB device", "BestFitAllocator",
                      {"workload": "scenario", "name": "memory limit"}, capacity=30 * MiB, catch_oom=True)]),
        ]),
        Part("part3", "Coalescing and empty_cache", cells=["a2-coalesce"], names=["CoalescingAllocator"], stubs=STUBS,
             objective="Merge free neighbours so whole segments come back; release them with empty_cache.",
             tests=[
            Test("coalescing", 4, observe_ops, verdict_coalescing, inputs_ops, partial=True, cases=[
                _scen("CoalescingAllocator", "coalescing, small pool"),
                _scen("CoalescingAllocator", "coalescing, large pool")]),
            Test("empty_cache", 3, observe_ops, verdict_empty_cache, inputs_ops, cases=[
                _scen("CoalescingAllocator", "empty_cache")]),
            Test("random mallocs and frees", 3, observe_ops, verdict_random, inputs_ops, partial=True, cases=[
                _case(f"random (seed {s})", "CoalescingAllocator", {"workload": "random", "seed": s, "n": 300})
                for s in (3, 4)]),
            Test("training trace budgets", 5, observe_ops, verdict_training, inputs_ops, partial=True, cases=[
                _case("MLP 64-512-512-10 trace", "CoalescingAllocator", TRAIN_MLP),
                _case("CNN 4-8 channels trace", "CoalescingAllocator", TRAIN_CNN)]),
        ]),
        Part("part4", "Out of memory, and minigrad on your pool", cells=["a2-oom"], names=["StudentAllocator"],
             stubs=STUBS,
             objective="When the device is full, release the cache and retry, then raise OutOfMemoryError; "
                       "train a model on memory your allocator hands out.", tests=[
            Test("retry after empty_cache", 2, observe_ops, verdict_oom, inputs_ops, partial=True, cases=[
                _scen("StudentAllocator", "retry", capacity=20 * MiB, catch_oom=True),
                _scen("StudentAllocator", "retry, twice", capacity=24 * MiB, catch_oom=True)]),
            Test("OutOfMemoryError", 3, observe_ops, verdict_oom, inputs_ops, partial=True, cases=[
                _case("scenario 'out of memory' on a 36 MiB device", "StudentAllocator",
                      {"workload": "scenario", "name": "out of memory"}, capacity=36 * MiB, catch_oom=True),
                _case("scenario 'out of memory' under memory_limit = 36 MiB", "StudentAllocator",
                      {"workload": "scenario", "name": "out of memory"}, limit=36 * MiB, catch_oom=True)]),
            Test("8 GB card", 3, observe_ops, verdict_card, inputs_ops, cases=[
                _case("MLP 64-2048-256-2048-10 trace on a 64 MiB card", "StudentAllocator", CARD_MLP,
                      capacity=CARD, catch_oom=True)]),
            Test("minigrad trains on your pool", 2, observe_minigrad, verdict_minigrad, inputs_minigrad, cases=[
                Case({"seed": 0, "widths": [64, 256, 256, 10], "batches": [96, 128, 32, 128, 64]},
                     label="MLP 64-256-256-10, 5 Adam steps")]),
        ]),
    ],
)
