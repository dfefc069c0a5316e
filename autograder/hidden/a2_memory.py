"""Hidden cases for a2_memory: other seeds, workloads, training traces and models. Never copied into the
sandbox: the parent builds every workload from these parameters and sends only arrays."""
from autograder.assignments.a2_memory import CARD, MiB, _trace
from autograder.spec import Case


def _c(cls, workload, **extra):
    return Case({**workload, "cls": cls, **extra})


CASES = {
    "part1/round_size": [{"seed": 101, "n": 300}],
    "part1/pools and segment sizes": [{"seed": 102, "n": 300}],
    "part1/bump allocator": [_c("BumpAllocator", {"workload": "random", "seed": 103, "n": 300, "finish": False}),
                             _c("BumpAllocator", {"workload": "training", "kind": "cnn", "widths": [4, 8],
                                                  "batches": [12, 62, 45], "seed": 3})],
    "part2/best fit": [_c("BestFitAllocator", {"workload": "holes", "seed": s}) for s in (104, 105, 106)],
    "part2/splitting": [_c("BestFitAllocator", {"workload": "random", "seed": 117, "n": 300, "finish": False})],
    "part2/random mallocs and frees": [_c("BestFitAllocator", {"workload": "random", "seed": 107, "n": 600,
                                                               "finish": False})],
    "part2/memory limit": [_c("BestFitAllocator", {"workload": "random", "seed": 108, "n": 300, "finish": False},
                              limit=48 * MiB, catch_oom=True)],
    "part3/coalescing": [_c("CoalescingAllocator", {"workload": "merge", "seed": s}) for s in (109, 110, 111)],
    "part3/empty_cache": [_c("CoalescingAllocator", {"workload": "random", "seed": 112, "n": 400,
                                                     "empty_every": 37})],
    "part3/random mallocs and frees": [_c("CoalescingAllocator", {"workload": "random", "seed": s, "n": 600})
                                       for s in (113, 114)],
    "part3/training trace budgets": [
        _c("CoalescingAllocator", _trace("mlp", [64, 1024, 512, 10], [257, 154, 81, 293, 128, 286, 153, 167])),
        _c("CoalescingAllocator", _trace("mlp", [64, 512, 512, 10], [90, 242, 183, 102, 48, 204, 111, 157])),
        _c("CoalescingAllocator", _trace("cnn", [8, 16], [61, 79, 90, 20, 31, 88])),
    ],
    "part4/retry after empty_cache": [_c("StudentAllocator", {"workload": "random", "seed": 115, "n": 400},
                                         capacity=48 * MiB, catch_oom=True)],
    "part4/OutOfMemoryError": [_c("StudentAllocator", {"workload": "random", "seed": 116, "n": 400},
                                  limit=40 * MiB, catch_oom=True)],
    "part4/8 GB card": [_c("StudentAllocator", _trace("mlp", [64, 2048, 256, 2048, 10],
                                                      [380, 120, 300, 451, 200, 99, 310, 150]),
                           capacity=CARD, catch_oom=True)],
    "part4/minigrad trains on your pool": [{"seed": 1, "widths": [64, 128, 512, 10],
                                            "batches": [200, 50, 150, 100, 256]}],
}
